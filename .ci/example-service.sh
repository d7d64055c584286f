#!/usr/bin/env bash
# Runs the example service (examples/axum-service) as its users would,
# against the PostgreSQL that .ci/services.sh starts: starts it, waits for
# /health, writes and reads a note, reads /metrics, then sends SIGTERM and
# expects a clean exit (graceful shutdown, close_gracefully) within 20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh

command -v curl >/dev/null || apt_install curl
cargo build --quiet -p cmap-example-axum
bin="${CARGO_TARGET_DIR:-target}/debug/cmap-example-axum"
port=38417
log=$(mktemp)
"$bin" "127.0.0.1:$port" "host=127.0.0.1 user=postgres dbname=test" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
url="http://127.0.0.1:$port"

wait_for 30 curl -fsS -o /dev/null "$url/health" || { cat "$log" >&2; die "the service never answered /health"; }
say "health: $(curl -fsS "$url/health")"
created=$(curl -fsS -X POST --data 'hello from CI' "$url/notes")
id=$(printf '%s' "$created" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
[ -n "$id" ] || die "POST /notes answered $created"
read_back=$(curl -fsS "$url/notes/$id")
printf '%s' "$read_back" | grep -q '"body":"hello from CI"' || die "GET /notes/$id answered $read_back"
say "note $id written and read back"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/notes/2147483647")" = 404 ] || die "a missing note is not 404"
metrics=$(curl -fsS "$url/metrics")
for name in cmap_connections_idle cmap_checkouts_total cmap_checkout_wait_seconds; do
  printf '%s\n' "$metrics" | grep -q "^$name" || die "/metrics lacks $name"
done
say "/metrics serves the pool's metrics"

kill -TERM "$pid"
for _ in $(seq 1 100); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
if kill -0 "$pid" 2>/dev/null; then
  cat "$log" >&2
  die "the service did not stop within 20 s of SIGTERM"
fi
wait "$pid" || die "the service exited with status $? after SIGTERM: $(cat "$log")"
grep -q '^stopped; 0 connections forced closed' "$log" || die "no graceful stop in its output: $(cat "$log")"
say "stopped gracefully on SIGTERM"
