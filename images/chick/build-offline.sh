#!/usr/bin/env bash
# Builds the offline chick image (FROM scratch: the static chick and
# busybox-static) without any registry. Usage: build-offline.sh [TAG]
# (default mother-chick:dev). Needs go, docker and /bin/busybox
# (Debian: busybox-static).
set -euo pipefail
tag="${1:-mother-chick:dev}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
busybox="${BUSYBOX:-/bin/busybox}"
if [ ! -x "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
	echo "build-offline: $busybox is missing or not static; install busybox-static (apt-get install busybox-static)" >&2
	exit 1
fi
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath -tags timetzdata -ldflags "-s -w -X main.version=${VERSION:-dev}" -o "$ctx/chick" ./cmd/chick)
cp "$busybox" "$ctx/busybox"
# The release comes from the VERSION file; VERSION in the environment is
# the build's label (git describe, or a test's name for it).
release="$(tr -d '[:space:]' <"$root/VERSION")"
protocol="$(sed -n 's/^const Protocol = \([0-9]*\)$/\1/p' "$root/pkg/version/version.go")"
if [ -z "$release" ] || [ -z "$protocol" ]; then
	echo "build-offline: cannot read the release (VERSION) or the protocol (pkg/version/version.go)" >&2
	exit 1
fi
cp "$here/Dockerfile.offline" "$here/passwd" "$here/group" "$here/bash" "$ctx/"
if ! docker build -q --build-arg MOTHER_RELEASE="$release" --build-arg MOTHER_PROTOCOL="$protocol" -f "$ctx/Dockerfile.offline" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
	cat "$ctx/build.log" >&2
	exit 1
fi
echo "built $tag"
