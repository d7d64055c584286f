#!/usr/bin/env bash
# Makes the test certificates the TLS tests and servers share, once: a
# CA of the project's own and a server certificate it signs for the name
# `localhost` (no IP address: a connection to 127.0.0.1 fails the host
# name check, which the tests want). Prints the folder.
#
#   ca.pem                 the CA certificate (what a client trusts)
#   server.pem, server.key the server's certificate and key
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DIR="${CMAP_TLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cmap-pool/tls}"
# Kept while all three are there and the certificate has a day left.
if [ -s "$DIR/ca.pem" ] && [ -s "$DIR/server.pem" ] && [ -s "$DIR/server.key" ] \
  && openssl x509 -checkend 86400 -noout -in "$DIR/server.pem" >/dev/null 2>&1; then
  say "certificates in $DIR"
  exit 0
fi
command -v openssl >/dev/null || apt_install openssl
mkdir -p "$DIR"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=cmap-pool test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null || die "openssl could not make the CA"
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
  -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null || die "openssl could not make the server key"
printf '%s\n' "subjectAltName=DNS:localhost" "basicConstraints=critical,CA:FALSE" \
  "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$work/ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
  -days 3650 -extfile "$work/ext" -out "$work/server.pem" 2>/dev/null || die "openssl could not sign the server certificate"
# Modes set, not left to the umask: the certificates are public, the key
# is its owner's (the servers get copies of their own, .ci/postgres.sh).
install -m 644 "$work/ca.pem" "$work/server.pem" "$DIR/"
install -m 600 "$work/server.key" "$DIR/"
say "made a CA and a certificate for localhost in $DIR"
