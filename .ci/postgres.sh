#!/usr/bin/env bash
# Makes sure PostgreSQL answers at 127.0.0.1:5432 (user postgres, trust
# authentication on the loopback addresses) with a database `test`, in
# clear text and over TLS (the certificate of .ci/tls.sh, for the name
# `localhost`): installs Debian's `postgresql` if it is missing, keeps the
# cluster's configuration as the tests need it (restarting it when that
# changed), starts it if it is down. Quick when all is already so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
psql_postgres() { psql -X -q -h 127.0.0.1 -U postgres -d postgres "$@"; }

tls_dir=$(bash "$(dirname "$0")/tls.sh" >/dev/null && echo "${CMAP_TLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cmap-pool/tls}")

[ -d /usr/lib/postgresql ] && command -v pg_lsclusters >/dev/null || apt_install postgresql
version=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
[ -n "$version" ] || die "no PostgreSQL server under /usr/lib/postgresql after the install"
if ! pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
  say "creating cluster $version/main"
  pg_createcluster "$version" main >/dev/null || die "pg_createcluster $version main failed"
fi
conf="/etc/postgresql/$version/main"
changed=0

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
  changed=1
fi

# Every file the server reads is the postgres user's, with the mode the
# server needs (the key: 600, or PostgreSQL refuses it), whatever the umask
# and whatever an earlier run left there.
put_file "$tls_dir/server.pem" "$conf/cmap-server.pem" postgres:postgres 644 && changed=1
put_file "$tls_dir/server.key" "$conf/cmap-server.key" postgres:postgres 600 && changed=1

# Room for the benchmarks' pools beside the tests' (the default is 100),
# and TLS with the project's certificate beside clear text.
install -d -o postgres -g postgres -m 755 "$conf/conf.d"
settings=$(mktemp)
trap 'rm -f "$settings"' EXIT
cat >"$settings" <<CONF
port = 5432
max_connections = 300
ssl = on
ssl_cert_file = '$conf/cmap-server.pem'
ssl_key_file = '$conf/cmap-server.key'
CONF
put_file "$settings" "$conf/conf.d/cmap-pool.conf" postgres:postgres 644 && changed=1

online() { pg_lsclusters --no-header | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online" { found = 1 } END { exit !found }'; }
if online; then
  if [ "$changed" -eq 1 ]; then
    say "restarting PostgreSQL $version (its configuration changed)"
    pg_ctlcluster "$version" main restart || die "pg_ctlcluster $version main restart failed (see /var/log/postgresql/)"
  else
    say "already up at 127.0.0.1:5432"
  fi
else
  say "starting PostgreSQL $version"
  pg_ctlcluster "$version" main start || die "pg_ctlcluster $version main start failed (see /var/log/postgresql/)"
fi
wait_for 30 ready || die "PostgreSQL does not answer at 127.0.0.1:5432 (see /var/log/postgresql/)"
psql_postgres -tAc "select 1" >/dev/null || die "user postgres cannot log in over 127.0.0.1 without a password"

if ! psql_postgres -tAc "select 1 from pg_database where datname = 'test'" | grep -q 1; then
  say "creating database test"
  psql_postgres -c "create database test"
fi
say "up at 127.0.0.1:5432: user postgres, trust authentication, database test, TLS for localhost"
