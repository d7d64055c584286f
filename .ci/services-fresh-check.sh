#!/usr/bin/env bash
# Proves that .ci/services.sh brings up every server from the state of a
# fresh machine, and that a second run right after changes nothing.
#
# 1. Stops the servers and removes what the project's scripts wrote (never
#    a package, nor anything the project did not write): PostgreSQL's
#    conf.d file, certificate copies, trust lines and database `test`; the
#    test certificates; FerretDB's data directories; Redis's log;
#    MariaDB's settings file, log, database `test` and user `cmap`. FerretDB's
#    binary stays: it is a build cache, and its build is checked whenever
#    it is missing.
# 2. Runs services.sh under umask 077, so that a file left to the umask
#    shows (the server that cannot read it does not start).
# 3. Checks each server as the tests use it: PostgreSQL in clear and over
#    TLS (verify-full, name `localhost`), Redis, MariaDB (user cmap over
#    TCP), FerretDB on its three ports (with SCRAM on 27017, TLS on 27019).
# 4. Runs services.sh again: it must start, restart, install and write
#    nothing, and leave every server as it was.
#
# Prints what it removed, what answered and how long each run took. Run as
# root; `.ci/run` calls it when it runs as root. It resets this machine's
# servers: their data is the tests' own.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || die "run as root: it stops and starts the servers"
here="$(cd "$(dirname "$0")" && pwd)"
tls_dir="${CMAP_TLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cmap-pool/tls}"

removed() { say "removed $*"; }

say "1. back to the state of a fresh machine"
if command -v pg_lsclusters >/dev/null; then
  while read -r version cluster _; do
    [ "$cluster" = main ] || continue
    conf="/etc/postgresql/$version/main"
    if pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online" { f = 1 } END { exit !f }'; then
      psql -X -q -h 127.0.0.1 -U postgres -d postgres -c "drop database if exists test" >/dev/null 2>&1 \
        && removed "PostgreSQL's database test"
      pg_ctlcluster "$version" main stop && say "stopped PostgreSQL $version"
    fi
    for file in "$conf/conf.d/cmap-pool.conf" "$conf/cmap-server.pem" "$conf/cmap-server.key"; do
      [ -e "$file" ] && rm -f "$file" && removed "$file"
    done
    if grep -q '^# cmap-pool: trust on loopback' "$conf/pg_hba.conf"; then
      # The marker and the two lines postgres.sh put after it.
      sed -i '/^# cmap-pool: trust on loopback/,+2d' "$conf/pg_hba.conf"
      removed "the trust lines from $conf/pg_hba.conf"
    fi
  done < <(pg_lsclusters --no-header)
fi
if command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  redis-cli -h 127.0.0.1 -p 6379 shutdown nosave >/dev/null 2>&1 || true
  wait_for 10 bash -c '! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1' || die "Redis did not stop"
  say "stopped Redis"
fi
rm -f /tmp/cmap-redis.log
if command -v mariadb-admin >/dev/null && mariadb-admin --protocol=socket -u root ping >/dev/null 2>&1; then
  mariadb --protocol=socket -u root -e "drop database if exists test;
    drop user if exists 'cmap'@'127.0.0.1', 'cmap'@'localhost'" \
    && removed "MariaDB's database test and user cmap"
  mariadb-admin --protocol=socket -u root shutdown || die "MariaDB did not stop"
  wait_for 30 bash -c '! pgrep -x mariadbd >/dev/null' || die "MariaDB did not stop"
  say "stopped MariaDB"
fi
for file in /etc/mysql/mariadb.conf.d/90-cmap-pool.cnf /tmp/cmap-mariadb.log; do
  [ -e "$file" ] && rm -f "$file" && removed "$file"
done
if pkill -f -- '--listen-addr=127.0.0.1:2701[78]'; then
  wait_for 10 bash -c '! pgrep -f -- "--listen-addr=127.0.0.1:2701[78]" >/dev/null' || die "FerretDB did not stop"
  say "stopped FerretDB"
fi
for dir in /tmp/cmap-ferretdb-*; do
  [ -d "$dir" ] && rm -rf "$dir" && removed "$dir"
done
[ -d "$tls_dir" ] && rm -rf "$tls_dir" && removed "$tls_dir"

say "2. .ci/services.sh from there, under umask 077"
first=$SECONDS
(umask 077 && bash "$here/services.sh") || die "services.sh failed from the fresh state"
first=$((SECONDS - first))

say "3. each server as the tests use it"
pg() { psql -X -q -tA "$@"; }
[ "$(pg -h 127.0.0.1 -U postgres -d test -c 'select 1')" = 1 ] \
  || die "PostgreSQL: user postgres cannot reach database test at 127.0.0.1:5432"
say "PostgreSQL 127.0.0.1:5432, database test, in clear: answered"
[ "$(pg "host=localhost port=5432 user=postgres dbname=test sslmode=verify-full sslrootcert=$tls_dir/ca.pem" \
  -c 'select ssl from pg_stat_ssl where pid = pg_backend_pid()')" = t ] \
  || die "PostgreSQL: no TLS session for localhost:5432 verified against $tls_dir/ca.pem"
say "PostgreSQL localhost:5432 over TLS (verify-full): answered"
redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG || die "Redis does not answer at 127.0.0.1:6379"
say "Redis 127.0.0.1:6379: PONG"
[ "$(mariadb -h 127.0.0.1 -P 3306 -u cmap -pcmap-secret -N -B test -e 'select 1')" = 1 ] \
  || die "MariaDB: user cmap cannot reach database test at 127.0.0.1:3306"
say "MariaDB 127.0.0.1:3306, user cmap, database test: answered"
command -v python3 >/dev/null || apt_install python3
probe() { python3 "$here/mongo-probe.py" "$@" | sed "s/^/[$(basename "$0" .sh)] FerretDB /"; }
probe 127.0.0.1 27017 --user cmap cmap-secret test || die "FerretDB at 127.0.0.1:27017"
probe 127.0.0.1 27018 || die "FerretDB at 127.0.0.1:27018"
probe localhost 27019 --tls "$tls_dir/ca.pem" || die "FerretDB over TLS at localhost:27019"

say "4. .ci/services.sh again: it must change nothing"
snapshot() {
  # What the scripts wrote (content, owner, mode) and the servers' processes.
  find /etc/postgresql -name 'cmap-*' -o -name pg_hba.conf | sort | xargs stat -c '%n %U:%G %a %Y'
  stat -c '%n %U:%G %a %Y' /etc/mysql/mariadb.conf.d/90-cmap-pool.cnf
  stat -c '%n %a %Y' "$tls_dir"/*
  pgrep -f 'postgres -D|redis-server|mariadbd|--listen-addr=127.0.0.1:2701' | sort
}
before=$(snapshot)
second=$SECONDS
output=$(bash "$here/services.sh") || die "the second run of services.sh failed"
second=$((SECONDS - second))
printf '%s\n' "$output"
if printf '%s\n' "$output" | grep -Ei '\b(starting|restarting|installing|creating|building|made|trust authentication for)\b'; then
  die "the second run of services.sh did something (above): it is not idempotent"
fi
[ "$(snapshot)" = "$before" ] || {
  diff <(printf '%s\n' "$before") <(snapshot) >&2 || true
  die "the second run of services.sh changed a file or a server process (above)"
}
say "services.sh took ${first} s from the fresh state, ${second} s the second time (no change)"
