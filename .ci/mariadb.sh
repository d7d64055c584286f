#!/usr/bin/env bash
# Makes sure MariaDB answers at 127.0.0.1:3306 with a database `test` and
# the tests' user `cmap`, password `cmap-secret` (from 127.0.0.1 and
# localhost, all privileges on `test`):
# mysql://cmap:cmap-secret@127.0.0.1:3306/test. Installs Debian's
# `mariadb-server` and `mariadb-client` if they are missing, keeps the
# server's settings as the tests need them (restarting it when they
# changed), and starts it if it is down, without systemd (mariadbd-safe,
# as Debian's init script does), its log in /tmp/cmap-mariadb.log. Quick
# when all is already so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ready() { mariadb-admin --protocol=socket -u root ping >/dev/null 2>&1; }
as_root() { mariadb --protocol=socket -u root -N -B "$@"; }
as_cmap() { mariadb -h 127.0.0.1 -P 3306 -u cmap -pcmap-secret -N -B test "$@"; }

apt_install mariadb-server mariadb-client
command -v mariadbd-safe >/dev/null || die "mariadbd-safe is missing after the install"
changed=0

# Loopback only, on the standard port, with room for the tests' pools.
# Debian's server reads every .cnf in this folder; ours sorts after its own.
settings=$(mktemp)
trap 'rm -f "$settings"' EXIT
cat >"$settings" <<CONF
# cmap-pool: the tests' MariaDB (.ci/mariadb.sh)
[mysqld]
bind-address = 127.0.0.1
port = 3306
max_connections = 300
CONF
put_file "$settings" /etc/mysql/mariadb.conf.d/90-cmap-pool.cnf root:root 644 && changed=1

start() {
  # The socket's folder lives in /run, which a container starts empty.
  install -d -o mysql -g mysql -m 755 /run/mysqld
  # Its log in /tmp, as Redis's (Debian's settings send it to a syslog
  # that a container lacks).
  setsid mariadbd-safe --skip-syslog --log-error=/tmp/cmap-mariadb.log >/dev/null 2>&1 </dev/null &
  wait_for 60 ready || die "MariaDB does not answer (see /tmp/cmap-mariadb.log)"
}
if ready; then
  if [ "$changed" -eq 1 ]; then
    say "restarting MariaDB (its configuration changed)"
    mariadb-admin --protocol=socket -u root shutdown || die "mariadb-admin shutdown failed"
    wait_for 30 bash -c '! mariadb-admin --protocol=socket -u root ping >/dev/null 2>&1' \
      || die "MariaDB did not stop"
    start
  else
    say "already up at 127.0.0.1:3306"
  fi
else
  say "starting MariaDB"
  start
fi

if [ -z "$(as_root -e "show databases like 'test'")" ]; then
  say "creating database test"
  as_root -e "create database test"
fi
if ! as_cmap -e 'select 1' >/dev/null 2>&1; then
  say "creating user cmap"
  for host in 127.0.0.1 localhost; do
    as_root -e "create or replace user 'cmap'@'$host' identified by 'cmap-secret';
                grant all privileges on test.* to 'cmap'@'$host'"
  done
fi
[ "$(as_cmap -e 'select 1')" = 1 ] || die "user cmap cannot reach database test at 127.0.0.1:3306"
say "up at 127.0.0.1:3306: user cmap, password cmap-secret, database test"
