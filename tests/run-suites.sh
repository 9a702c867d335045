#!/usr/bin/env bash
# Run every suite: all of them on SQLite, then the database-backed ones again on a throwaway
# PostgreSQL started here on a free port. Suites that need Redis or Chromium start those themselves.
set -uo pipefail
PY=${PY:-.venv/bin/python}
DB_SUITES=(tests/django tests/integration tests/browser tests/api)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
unset DATABASE_URL REDIS_URL

pg_dir=""
pg_bin=""
stop_postgres() {
  if [ -n "$pg_dir" ]; then
    runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}
trap stop_postgres EXIT

start_postgres() {
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$pg_bin/initdb" ] || { echo "PostgreSQL server binaries not found" >&2; return 1; }
  pg_dir=$(mktemp -d /tmp/kb-pg.XXXXXX)
  chown postgres "$pg_dir"
  local port
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  runuser -u postgres -- "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres >/dev/null || return 1
  runuser -u postgres -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-p $port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null || return 1
  export PG_TEST_URL="postgres://postgres@127.0.0.1:$port/kernelbench"
  echo "PostgreSQL on 127.0.0.1:$port"
}

status=0
echo "== all suites on SQLite =="
"$PY" -m pytest tests -q -ra || status=1

existing=()
for suite in "${DB_SUITES[@]}"; do [ -d "$suite" ] && existing+=("$suite"); done
if [ ${#existing[@]} -gt 0 ]; then
  echo "== database suites on PostgreSQL: ${existing[*]} =="
  if start_postgres; then
    DATABASE_URL=$PG_TEST_URL "$PY" -m pytest "${existing[@]}" -q -ra
    rc=$?
    # 5 means the selection held no test, which is no failure of the code.
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || status=1
  else
    echo "could not start PostgreSQL" >&2
    status=1
  fi
fi
exit $status
