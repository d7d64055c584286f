#!/usr/bin/env bash
# Makes sure Redis answers at 127.0.0.1:6379: installs Debian's
# `redis-server` if it is missing and starts it if it is down, with no
# persistence (nothing written into the working tree).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ready() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ready; then
  say "already up at 127.0.0.1:6379"
  exit 0
fi
apt_install redis-server
command -v redis-server >/dev/null || die "redis-server is missing after the install"
say "starting Redis"
redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp \
  --logfile /tmp/cmap-redis.log --daemonize yes
wait_for 30 ready || die "Redis does not answer at 127.0.0.1:6379 (see /tmp/cmap-redis.log)"
say "up at 127.0.0.1:6379"
