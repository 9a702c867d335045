#!/usr/bin/env bash
# Run every suite: the suites that need no database (the evaluation library, the exploits, the units,
# the load smoke tests), the database-backed ones on SQLite, and the database-backed ones again on a
# throwaway PostgreSQL started here on a free port; each run ends with its 30 slowest tests.
# One after another by default (about 37 minutes on two cores). KB_TEST_STREAMS=3 runs the three at
# once, each printed whole when it ends: 22-24 minutes (docs/performance.md). The first part's
# compiles then starve the others' live sites (seeding on PostgreSQL 7 times slower, once a board
# crawl from 18 s to 544 s, near its 600 s limit), so that part runs niced; not the default while
# one part alone takes 22 minutes at once and a test of the others can come near its limit.
set -uo pipefail
PY=${PY:-.venv/bin/python}
DB_SUITES=(tests/django tests/integration tests/browser tests/api)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
unset DATABASE_URL REDIS_URL

existing() { for suite in "$@"; do [ -d "$suite" ] && printf '%s\n' "$suite"; done; }
mapfile -t db_suites < <(existing "${DB_SUITES[@]}")
mapfile -t other_suites < <(for d in tests/*/; do d=${d%/}; [[ " ${DB_SUITES[*]} " == *" $d "* ]] || echo "$d"; done)
pytest_args=(-q -ra --durations=30 -p no:cacheprovider)

logs=$(mktemp -d /tmp/kb-suites.XXXXXX)
trap 'rm -rf "$logs"' EXIT
names=() pids=()
stream() {  # stream NAME COMMAND...: run it; at once, its output into its log (named by its number)
  local n=${#names[@]}; names+=("$1"); shift
  if [ "${KB_TEST_STREAMS:-1}" = "1" ]; then
    echo "== ${names[$n]} =="
    local t0=$(date +%s)
    "$@"; echo $? > "$logs/$n.rc"
    echo $(( $(date +%s) - t0 )) > "$logs/$n.s"
    : > "$logs/$n.log"
    pids+=("")
  else
    ( t0=$(date +%s); "$@" > "$logs/$n.log" 2>&1; echo $? > "$logs/$n.rc"; echo $(( $(date +%s) - t0 )) > "$logs/$n.s" ) &
    pids+=($!)
  fi
}

start=$(date +%s)
# At once, the compiles of the suites without a database yield to the live sites of the others
# (measured: seeding on PostgreSQL took 7 times as long beside a killed-build test's compiles).
yield_cpu=(); [ "${KB_TEST_STREAMS:-1}" = "1" ] || yield_cpu=(nice -n 10)
stream "suites without a database (${other_suites[*]})" "${yield_cpu[@]}" "$PY" -m pytest "${other_suites[@]}" "${pytest_args[@]}"
stream "database suites on SQLite (${db_suites[*]})" "$PY" -m pytest "${db_suites[@]}" "${pytest_args[@]}"
stream "database suites on PostgreSQL (${db_suites[*]})" env PY="$PY" bash tests/with-postgres.sh "$PY" -m pytest "${db_suites[@]}" "${pytest_args[@]}"

status=0
for i in "${!names[@]}"; do
  [ -n "${pids[$i]}" ] && wait "${pids[$i]}"
  rc=$(cat "$logs/$i.rc" 2>/dev/null || echo 1)
  echo "== ${names[$i]}: exit $rc in $(cat "$logs/$i.s" 2>/dev/null || echo "?") s =="
  cat "$logs/$i.log"
  # 5 means the selection held no test, which is no failure of the code.
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || status=1
done
echo "== every suite: $(( $(date +%s) - start )) s =="
exit $status
