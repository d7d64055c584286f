#!/usr/bin/env bash
# Makes sure PostgreSQL answers at 127.0.0.1:5432 (user postgres, trust
# authentication on the loopback addresses) with a database `test`:
# installs Debian's `postgresql` if it is missing, configures the
# cluster, starts it if it is down. Quick when all is already up.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
psql_postgres() { psql -X -q -h 127.0.0.1 -U postgres -d postgres "$@"; }

if ready && psql_postgres -tAc "select 1" >/dev/null 2>&1; then
  say "already up at 127.0.0.1:5432"
else
  apt_install postgresql
  command -v pg_lsclusters >/dev/null || die "postgresql-common (pg_lsclusters) is missing after the install"
  version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$version" ] || die "no PostgreSQL server under /usr/lib/postgresql after the install"
  if ! pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
    say "creating cluster $version/main"
    pg_createcluster "$version" main >/dev/null || die "pg_createcluster $version main failed"
  fi
  conf="/etc/postgresql/$version/main"
  # Trust on the loopback addresses, ahead of Debian's password rules (the
  # first matching line wins); written once.
  if ! grep -q '^# cmap-pool: trust on loopback' "$conf/pg_hba.conf"; then
    say "trust authentication for 127.0.0.1 and ::1 in $conf/pg_hba.conf"
    {
      echo '# cmap-pool: trust on loopback, for the tests and benchmarks'
      echo 'host all all 127.0.0.1/32 trust'
      echo 'host all all ::1/128 trust'
      cat "$conf/pg_hba.conf"
    } >"$conf/pg_hba.conf.new"
    chown --reference="$conf/pg_hba.conf" "$conf/pg_hba.conf.new"
    chmod --reference="$conf/pg_hba.conf" "$conf/pg_hba.conf.new"
    mv "$conf/pg_hba.conf.new" "$conf/pg_hba.conf"
  fi
  # Room for the benchmarks' pools side by side with the tests' (the
  # default is 100).
  mkdir -p "$conf/conf.d"
  printf 'port = 5432\nmax_connections = 300\n' >"$conf/conf.d/cmap-pool.conf"
  if pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online" { found = 1 } END { exit !found }'; then
    say "restarting PostgreSQL $version (configuration changed)"
    pg_ctlcluster "$version" main restart
  else
    say "starting PostgreSQL $version"
    pg_ctlcluster "$version" main start || die "pg_ctlcluster $version main start failed (see /var/log/postgresql/)"
  fi
  wait_for 30 ready || die "PostgreSQL does not answer at 127.0.0.1:5432 (see /var/log/postgresql/)"
  psql_postgres -tAc "select 1" >/dev/null || die "user postgres cannot log in over 127.0.0.1 without a password"
fi

if ! psql_postgres -tAc "select 1 from pg_database where datname = 'test'" | grep -q 1; then
  say "creating database test"
  psql_postgres -c "create database test"
fi
say "up at 127.0.0.1:5432: user postgres, trust authentication, database test"
