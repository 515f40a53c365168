#!/usr/bin/env bash
# Starts Debian's PostgreSQL on 127.0.0.1:5432 for the store tests and prints the URL they use
# (FUZZBALL_TEST_POSTGRES_URL). Idempotent; run as root.
set -euo pipefail
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
cluster=main
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^$version $cluster$"; then
  pg_createcluster -q "$version" "$cluster" >/dev/null
fi
pg_ctlcluster "$version" "$cluster" start >/dev/null 2>&1 || pg_ctlcluster "$version" "$cluster" status >/dev/null
for _ in $(seq 50); do
  su postgres -c "psql -qAtc 'select 1'" >/dev/null 2>&1 && break
  sleep 0.2
done
su postgres -c "psql -qAtc \"select 1 from pg_roles where rolname='fuzzball'\"" | grep -q 1 ||
  su postgres -c "psql -qc \"create role fuzzball login superuser password 'fuzzball'\""
su postgres -c "psql -qAtc \"select 1 from pg_database where datname='fuzzball'\"" | grep -q 1 ||
  su postgres -c "createdb -O fuzzball fuzzball"
echo "postgresql://fuzzball:fuzzball@127.0.0.1:5432/fuzzball"
