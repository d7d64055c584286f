#!/usr/bin/env bash
# Makes sure every server the tests and benchmarks need answers on this
# machine, installing and starting what is missing (idempotent, and quick
# when all is up):
#
#   PostgreSQL  127.0.0.1:5432   user postgres, trust auth, database test
#   Redis       127.0.0.1:6379
#   MariaDB     127.0.0.1:3306   user cmap / cmap-secret, database test
#   FerretDB    127.0.0.1:27017  (authentication; user cmap / cmap-secret, database test)
#               127.0.0.1:27018  (no authentication), TLS at localhost:27019
#   promtool    the alert rules' checker (Debian's `prometheus` package; no server)
#   TLS: a CA and a certificate for `localhost` of the project's own
#   (.ci/tls.sh, in ~/.cache/cmap-pool/tls): PostgreSQL takes TLS too.
#
# Each script prints what it did and fails naming the missing piece.
# Run as root (apt-get, pg_ctlcluster). `.ci/run` calls it; run it by hand
# before `CMAP_PG_TESTS=1 CMAP_REDIS_TESTS=1 CMAP_MONGO_TESTS=1 cargo test`
# (and `CMAP_MYSQL_TESTS=1 cargo test -p cmap-mysql --all-features`).
set -euo pipefail
cd "$(dirname "$0")"

for service in postgres redis mariadb ferretdb promtool; do
  start=$SECONDS
  bash "./$service.sh"
  echo "[$service] $((SECONDS - start)) s"
done
