#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL started here on a free port (DATABASE_URL is set for
# it), then stop and remove the server. Example: bash tests/with-postgres.sh .venv/bin/python -m pytest tests/django
set -uo pipefail
PY=${PY:-.venv/bin/python}
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pg_bin/initdb" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
pg_dir=$(mktemp -d /tmp/kb-pg.XXXXXX)
stop_postgres() {
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$pg_dir"
}
trap stop_postgres EXIT
chown postgres "$pg_dir"
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres >/dev/null || exit 1
runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
  -o "-p $port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=off ${PG_EXTRA_OPTIONS:-}" start >/dev/null || exit 1
echo "PostgreSQL on 127.0.0.1:$port" >&2
DATABASE_URL="postgres://postgres@127.0.0.1:$port/kernelbench" "$@"
