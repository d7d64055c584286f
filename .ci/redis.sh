#!/usr/bin/env bash
# Makes sure the project's Redis server answers at 127.0.0.1:6379, starting
# it if it is down. Installs nothing: the server is part of every machine of
# the project.
set -euo pipefail

ready() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! ready; then
  command -v redis-server >/dev/null || { echo "error: redis-server is not installed" >&2; exit 1; }
  echo "starting Redis"
  # No snapshots: nothing written into the working tree.
  redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no --daemonize yes
  for _ in $(seq 1 30); do ready && break; sleep 1; done
fi
ready || { echo "error: Redis does not answer at 127.0.0.1:6379" >&2; exit 1; }
echo "Redis is up"
