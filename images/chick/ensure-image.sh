#!/usr/bin/env bash
# make run's chick step: builds the offline chick image (build-offline.sh)
# when a Docker engine answers and the image is not there yet, so the
# first chick works; otherwise it says in one line why chicks are off
# until `make image`. It never fails: Mother chats without chicks.
# Usage: ensure-image.sh [TAG] (default mother-chick:dev).
set -uo pipefail
tag="${1:-mother-chick:dev}"
here="$(cd "$(dirname "$0")" && pwd)"
say() { echo "make run: $*" >&2; }
if ! command -v docker >/dev/null 2>&1; then
	say "no docker command here, so chicks are off (Mother chats without them); install Docker (apt-get install docker.io), then run make image"
	exit 0
fi
if ! timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
	say "no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST}, so chicks are off (Mother chats without them); start one (or join the docker group), then run make image"
	exit 0
fi
if docker image inspect "$tag" >/dev/null 2>&1; then
	exit 0
fi
busybox="${BUSYBOX:-/bin/busybox}"
if [ ! -x "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
	say "the chick image $tag is not built, so chicks are off; apt-get install busybox-static, then run make image"
	exit 0
fi
say "building the chick image $tag (once, about a minute)..."
if ! bash "$here/build-offline.sh" "$tag" >/dev/null; then
	say "the chick image did not build (above), so chicks are off until make image succeeds"
fi
exit 0
