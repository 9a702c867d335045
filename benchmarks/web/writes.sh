#!/usr/bin/env bash
# The write timings of the web benchmark alone, without its HTTP part (issue 13, "Writes stay
# fast"): a throwaway database holding the generated dataset at SCALE, then `python -m benchmarks.web.bench writes`
# (re-scoring one run; importing a 270-kernel run folder through import_run: seconds and queries),
# then `rebuild_boards --verify-only`.
# DB=sqlite (default) or DB=postgres. Example: SCALE=20k DB=postgres bash benchmarks/web/writes.sh
set -euo pipefail
SCALE=${SCALE:-20k}
PY=${PY:-.venv/bin/python}
DB=${DB:-sqlite}
if [ "$DB" = postgres ] && [ -z "${BENCH_IN_POSTGRES:-}" ]; then
  BENCH_IN_POSTGRES=1 exec bash tests/with-postgres.sh bash "$0" "$@"
fi
work=$(mktemp -d /tmp/kb-bench-writes.XXXXXX)
trap 'rm -rf "$work"' EXIT
export DJANGO_SETTINGS_MODULE=config.settings_production SECRET_KEY=bench-only SECURE_SSL_REDIRECT=0
export KB_VAR_DIR="$work" LOG_LEVEL=WARNING
if [ "$DB" = postgres ]; then
  pg_port=$(echo "$DATABASE_URL" | sed -E 's#.*:([0-9]+)/.*#\1#')
  runuser -u postgres -- createdb -h 127.0.0.1 -p "$pg_port" kernelbench
else
  export DATABASE_URL="sqlite:///$work/db.sqlite3"
fi
echo "== dataset: SCALE=$SCALE on $DB"
$PY manage.py migrate -v0
$PY -m benchmarks.web.bench generate --scale "$SCALE" | grep -v "kernels and evaluations:\|re-scored\|verified"
echo "== writes"
$PY -m benchmarks.web.bench writes | grep -v "^  \|^Importing"
echo "== the stored aggregates after the import, against a fresh computation"
$PY manage.py rebuild_boards --verify-only | tail -1
