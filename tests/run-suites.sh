#!/usr/bin/env bash
# Run every suite: the suites that need no database (the evaluation library, the exploits, the units,
# the load smoke tests), the database-backed ones on SQLite, and the database-backed ones again on a
# throwaway PostgreSQL started here on a free port; each part ends with its 30 slowest tests.
# The parts run one after another, each spread over pytest-xdist processes, a test file to a process:
# most tests wait (on subprocesses, servers, sandboxes, timeouts) more than they compute, so several
# processes overlap one's waits with another's work, beyond the cores (docs/performance.md, "The
# suite in two processes a part" and "Four processes a part"). KB_TEST_WORKERS (4 by default; 1 runs
# each part in one process) for the database parts; the part without a database, whose tests compile
# and time kernels on the CPU, takes at most 3: a fourth did not shorten it (535 s against 526 on the
# 2-core machine) and would only load the cores its timing tests measure on.
# Every test makes its own ports, folders, Redis and (per process) test database; the tests that stop
# or restart their PostgreSQL server (marked stops_database_server) run on a server of their own.
set -uo pipefail
PY=${PY:-.venv/bin/python}
WORKERS=${KB_TEST_WORKERS:-4}
NODB_WORKERS=$(( WORKERS < 3 ? WORKERS : 3 ))
DB_SUITES=(tests/django tests/integration tests/browser tests/api)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
unset REDIS_URL

pytest_args=(-q -ra --durations=30 -p no:cacheprovider)
spread() { [ "$1" -gt 1 ] && printf '%s\n' -n "$1" --dist loadfile; }  # spread N: pytest-xdist's options
mapfile -t db_spread < <(spread "$WORKERS")
mapfile -t nodb_spread < <(spread "$NODB_WORKERS")
existing() { for suite in "$@"; do [ -d "$suite" ] && printf '%s\n' "$suite"; done; }
mapfile -t db_suites < <(existing "${DB_SUITES[@]}")

if [ "${1:-}" = "--postgresql-part" ]; then  # (inside tests/with-postgres.sh: DATABASE_URL is set)
  exec "$PY" -m pytest "${db_suites[@]}" "${pytest_args[@]}" "${db_spread[@]}" -m "not stops_database_server"
fi

unset DATABASE_URL  # the parts before PostgreSQL's run on SQLite
mapfile -t other_suites < <(for d in tests/*/; do d=${d%/}; [[ " ${DB_SUITES[*]} " == *" $d "* ]] || echo "$d"; done)
status=0
part() {  # part NAME COMMAND...: run it, say how it ended and how long it took
  echo "== $1 =="
  local name=$1 t0=$SECONDS
  shift
  "$@"
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s =="
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1
}

# The tests that stop or restart their PostgreSQL server get a server of their own and run beside the
# SQLite part (they mostly wait: a 20 s outage, a restart), not alone after the PostgreSQL part; only
# the files that hold them are collected.
mapfile -t stopping < <(grep -rl --include='*.py' 'stops_database_server' "${db_suites[@]}")
stopping_log=$(mktemp /tmp/kb-stopping.XXXXXX)
start_stopping_part() {
  [ "${#stopping[@]}" -gt 0 ] || return 0
  PY="$PY" bash tests/with-postgres.sh "$PY" -m pytest "${stopping[@]}" -q -ra -p no:cacheprovider \
    -m stops_database_server > "$stopping_log" 2>&1 &
  stopping_pid=$!
}
finish_stopping_part() {
  [ -n "${stopping_pid:-}" ] || return 0
  wait "$stopping_pid"
  local rc=$?
  cat "$stopping_log"
  echo "== the tests that stop their PostgreSQL server (a server of their own, beside the SQLite part): exit $rc =="
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1
}

start=$SECONDS
part "suites without a database (${other_suites[*]})" "$PY" -m pytest "${other_suites[@]}" "${pytest_args[@]}" "${nodb_spread[@]}"
start_stopping_part
part "database suites on SQLite (${db_suites[*]})" "$PY" -m pytest "${db_suites[@]}" "${pytest_args[@]}" "${db_spread[@]}"
finish_stopping_part
rm -f "$stopping_log"
part "database suites on PostgreSQL (${db_suites[*]})" env PY="$PY" KB_TEST_WORKERS="$WORKERS" \
  bash tests/with-postgres.sh bash "$0" --postgresql-part
echo "== every suite: $((SECONDS - start)) s =="
exit $status
