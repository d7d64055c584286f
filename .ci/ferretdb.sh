#!/usr/bin/env bash
# Makes sure FerretDB v1.24.2 (a MongoDB-compatible server, SQLite
# backend) answers at:
#
#   127.0.0.1:27017  authentication on (--test-enable-new-auth), with the
#                    user `cmap`, password `cmap-secret`, in database
#                    `test`: mongodb://cmap:cmap-secret@127.0.0.1:27017/test
#                    (`hello` and `ping` also answer unauthenticated)
#   127.0.0.1:27018  no authentication: mongodb://127.0.0.1:27018/
#   127.0.0.1:27019  the same server over TLS, with the certificate of
#                    .ci/tls.sh for the name `localhost`:
#                    mongodb://localhost:27019/?tls=true&tlsCAFile=<that folder>/ca.pem
#
# Each keeps its data and log in a new temporary directory and serves its
# Prometheus metrics at 127.0.0.1:28017 / :28018 (/debug/metrics).
# Telemetry is off.
#
# The binary is built once with the machine's own Go from the module
# registry and cached. `go install ...@v1.24.2` alone builds a binary
# that panics at start (the module ships without the version file
# FerretDB's build writes), so this downloads the module, writes that
# file into a copy of it and builds `cmd/ferretdb` there.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VERSION=v1.24.2
MODULE=github.com/FerretDB/FerretDB
BIN="${CMAP_FERRETDB_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cmap-pool/ferretdb-$VERSION}"

ready() { curl -fsS -o /dev/null "http://127.0.0.1:$1/debug/readyz" 2>/dev/null; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

build() {
  # The machine's Go, where its installer puts it, if no profile put it on PATH.
  command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || export PATH="/usr/local/go/bin:$PATH"
  command -v go >/dev/null || die "Go is not installed (FerretDB is built with the machine's own Go)"
  local src
  say "building FerretDB $VERSION with $(go version | awk '{ print $3 }')"
  src=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || die "go mod download $MODULE@$VERSION failed"
  local work
  work=$(mktemp -d)
  cp -r "$src/." "$work"
  chmod -R u+w "$work"
  # A plain `go install` lacks this file, and its binary panics at start.
  echo "$VERSION" >"$work/build/version/version.txt"
  mkdir -p "$(dirname "$BIN")"
  (cd "$work" && GOFLAGS=-buildvcs=false go build -o "$BIN.tmp" ./cmd/ferretdb) || die "go build of FerretDB $VERSION failed"
  mv "$BIN.tmp" "$BIN"
  rm -rf "$work"
}

# start PORT DEBUG_PORT ARGS...: one FerretDB in a new temporary directory.
start() {
  local port="$1" debug_port="$2"
  shift 2
  if ready "$debug_port"; then
    say "already up at 127.0.0.1:$port"
    return
  fi
  local dir
  dir=$(mktemp -d "/tmp/cmap-ferretdb-$port.XXXXXX")
  say "starting FerretDB at 127.0.0.1:$port (data and log in $dir)"
  setsid "$BIN" --handler=sqlite --sqlite-url="file:$dir/" --state-dir="$dir" \
    --listen-addr="127.0.0.1:$port" --debug-addr="127.0.0.1:$debug_port" \
    --telemetry=disable "$@" >"$dir/ferretdb.log" 2>&1 </dev/null &
  wait_for 30 ready "$debug_port" || {
    tail -n 20 "$dir/ferretdb.log" >&2
    die "FerretDB does not answer at 127.0.0.1:$port (log: $dir/ferretdb.log)"
  }
}

# The readiness probe asks FerretDB's debug endpoint.
command -v curl >/dev/null || apt_install curl
tls_dir=$(bash "$(dirname "$0")/tls.sh" >/dev/null && echo "${CMAP_TLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cmap-pool/tls}")
if ready 28018 && ! listening 27019; then
  # Started by an earlier version of this script, without TLS.
  say "restarting the FerretDB at 127.0.0.1:27018 to add its TLS listener"
  pkill -f -- "--listen-addr=127.0.0.1:27018" || true
  for _ in $(seq 1 50); do ready 28018 || break; sleep 0.1; done
fi
if ! ready 28017 || ! ready 28018; then
  [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -qx "version: $VERSION" || build
  start 27017 28017 --test-enable-new-auth --log-level=INFO \
    --setup-database=test --setup-username=cmap --setup-password=cmap-secret
  start 27018 28018 --log-level=INFO --listen-tls=127.0.0.1:27019 \
    --listen-tls-cert-file="$tls_dir/server.pem" --listen-tls-key-file="$tls_dir/server.key"
fi
say "up: 127.0.0.1:27017 (authentication, user cmap in test), 127.0.0.1:27018 (none), TLS at localhost:27019"
