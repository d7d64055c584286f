#!/usr/bin/env bash
# Makes sure the project's PostgreSQL server answers at 127.0.0.1:5432 (user
# postgres, trust auth) with a database `test`, starting the cluster if it is
# down. Installs nothing: the server is part of every machine of the project.
set -euo pipefail

ready() { pg_isready -q -h 127.0.0.1 -p 5432 -U postgres 2>/dev/null; }

if ! ready; then
  version=$(pg_lsclusters --no-header 2>/dev/null | awk '$2 == "main" { print $1; exit }')
  version=${version:-$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)}
  if [ -z "$version" ]; then
    echo "error: no PostgreSQL installation found" >&2
    exit 1
  fi
  echo "starting PostgreSQL $version"
  pg_ctlcluster "$version" main start
  for _ in $(seq 1 30); do ready && break; sleep 1; done
fi
ready || { echo "error: PostgreSQL does not answer at 127.0.0.1:5432" >&2; exit 1; }

if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "select 1 from pg_database where datname = 'test'" | grep -q 1; then
  psql -h 127.0.0.1 -U postgres -d postgres -c "create database test"
fi
echo "PostgreSQL is up; database test exists"
