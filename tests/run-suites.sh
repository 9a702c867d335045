#!/usr/bin/env bash
# Run every suite: all of them on SQLite, then the database-backed ones again on a throwaway
# PostgreSQL started here on a free port. Suites that need Redis or Chromium start those themselves.
# Each run ends with its 30 slowest tests (what a faster suite must cut first).
set -uo pipefail
PY=${PY:-.venv/bin/python}
DB_SUITES=(tests/django tests/integration tests/browser tests/api)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
unset DATABASE_URL REDIS_URL

status=0
echo "== all suites on SQLite =="
"$PY" -m pytest tests -q -ra --durations=30 || status=1

existing=()
for suite in "${DB_SUITES[@]}"; do [ -d "$suite" ] && existing+=("$suite"); done
if [ ${#existing[@]} -gt 0 ]; then
  echo "== database suites on PostgreSQL: ${existing[*]} =="
  PY=$PY bash tests/with-postgres.sh "$PY" -m pytest "${existing[@]}" -q -ra --durations=30
  rc=$?
  # 5 means the selection held no test, which is no failure of the code.
  [ $rc -eq 0 ] || [ $rc -eq 5 ] || status=1
fi
exit $status
