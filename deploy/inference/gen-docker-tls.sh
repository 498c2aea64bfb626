#!/usr/bin/env bash
# Generates the certificates that let Mother (the client) reach the inference
# server's Docker API over TLS, with mutual authentication:
#
#   ca.pem ca-key.pem          a private CA (keep ca-key.pem offline)
#   server-cert.pem server-key.pem   for dockerd on the inference server
#   cert.pem key.pem           Mother's client certificate
#
# usage: gen-docker-tls.sh [-d DIR] [-days N] SERVER_DNS_NAME [SERVER_IP ...]
# Example: gen-docker-tls.sh -d ./docker-tls inference.lan 10.0.0.41
set -euo pipefail

dir=./docker-tls
days=825
while [ $# -gt 0 ]; do
	case "$1" in
	-d) dir=$2; shift 2 ;;
	-days) days=$2; shift 2 ;;
	-h|--help) sed -n '2,12p' "$0"; exit 0 ;;
	-*) echo "unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if [ $# -lt 1 ]; then
	echo "usage: $0 [-d DIR] [-days N] SERVER_DNS_NAME [SERVER_IP ...]" >&2
	exit 2
fi
name=$1; shift
san="DNS:$name"
for ip in "$@"; do san="$san,IP:$ip"; done

mkdir -p "$dir"
cd "$dir"
umask 077
if [ -e ca-key.pem ]; then
	echo "$dir/ca-key.pem exists; refusing to overwrite (remove the directory to start over)" >&2
	exit 1
fi

openssl genrsa -out ca-key.pem 4096 2>/dev/null
openssl req -new -x509 -days "$days" -key ca-key.pem -sha256 -subj "/CN=Mother Docker CA" -out ca.pem

openssl genrsa -out server-key.pem 4096 2>/dev/null
openssl req -new -key server-key.pem -subj "/CN=$name" -out server.csr
printf 'subjectAltName = %s\nextendedKeyUsage = serverAuth\n' "$san" > server-ext.cnf
openssl x509 -req -days "$days" -sha256 -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
	-out server-cert.pem -extfile server-ext.cnf 2>/dev/null

openssl genrsa -out key.pem 4096 2>/dev/null
openssl req -new -key key.pem -subj "/CN=mother" -out client.csr
printf 'extendedKeyUsage = clientAuth\n' > client-ext.cnf
openssl x509 -req -days "$days" -sha256 -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
	-out cert.pem -extfile client-ext.cnf 2>/dev/null

rm -f server.csr client.csr server-ext.cnf client-ext.cnf ca.srl
chmod 0400 ca-key.pem server-key.pem key.pem
chmod 0444 ca.pem server-cert.pem cert.pem
cat <<MSG
Certificates in $dir:
  on the inference server: ca.pem server-cert.pem server-key.pem  (-> /etc/docker/tls/)
  on the Pi (Mother):      ca.pem cert.pem key.pem                (-> /etc/mother/docker/)
  keep ca-key.pem offline.
MSG
