#!/usr/bin/env bash
# The web benchmark of issue 13 (`make bench-web SCALE=1.3M`): a throwaway PostgreSQL, the
# field-sized dataset generated through the project's models, gunicorn with 2 workers and the
# production settings, then p50/p95 per page and API endpoint, query counts and write timings;
# then the boards while writers store results at 1, 5 and 50 per second (issue 22; the 50 from
# ten processes, as GPU hosts would be), beside the site's background re-scorer, and a check
# that the stored boards equal a fresh computation (on a sample). CHURN_ONLY=1: the churn phases
# alone. On PostgreSQL the dataset's kernels and evaluations are generated inside the database and
# the read model is rebuilt by sets (docs/performance.md, "Ten times the field").
set -euo pipefail
SCALE=${SCALE:-20k}
PY=${PY:-.venv/bin/python}
REPEAT=${REPEAT:-20}
# BENCH_DATABASE_URL: time an already generated database (skips generating; its data is kept).
if [ -n "${BENCH_DATABASE_URL:-}" ]; then
  export DATABASE_URL=$BENCH_DATABASE_URL BENCH_IN_POSTGRES=1
elif [ -z "${BENCH_IN_POSTGRES:-}" ]; then
  BENCH_IN_POSTGRES=1 exec bash tests/with-postgres.sh bash "$0" "$@"
else
  pg_port=$(echo "$DATABASE_URL" | sed -E 's#.*:([0-9]+)/.*#\1#')
  runuser -u postgres -- createdb -h 127.0.0.1 -p "$pg_port" kernelbench
fi
work=$(mktemp -d /tmp/kb-bench-web.XXXXXX)
gunicorn_pid="" redis_pid="" rescorer_pid=""
trap 'kill $gunicorn_pid $redis_pid $rescorer_pid 2>/dev/null || true; rm -rf "$work"' EXIT
export DJANGO_SETTINGS_MODULE=config.settings_production SECRET_KEY=bench-only SECURE_SSL_REDIRECT=0
export STATIC_ROOT="$work/static" KB_VAR_DIR="$work/var" LOG_LEVEL=WARNING
export BOARD_RESCORER=1  # as the site runs: writers mark, the re-scorer started below re-scores
mkdir -p "$work/var"
# The cache every gunicorn worker shares, as in production (REDIS_URL set: settings.CACHES).
redis_port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
redis_pid=$!
export REDIS_URL="redis://127.0.0.1:$redis_port/0"
echo "== dataset (${BENCH_DATABASE_URL:+already generated at }${BENCH_DATABASE_URL:-SCALE=$SCALE})"
$PY manage.py migrate -v0
if [ -z "${BENCH_DATABASE_URL:-}" ]; then
  $PY -m benchmarks.web.bench generate --scale "$SCALE" | grep -v "kernels and evaluations:\|re-scored\|verified"
fi
$PY manage.py collectstatic --noinput -v0
if [ -z "${CHURN_ONLY:-}" ]; then
  echo "== SQL queries per page (after one warm-up request)"
  $PY -m benchmarks.web.bench queries
fi
$PY -m benchmarks.web.bench urls >"$work/urls.txt"
cookie=$($PY -m benchmarks.web.bench session)
web_port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export SITE_URL="http://127.0.0.1:$web_port"  # the links of the API boards the re-scorer keeps built
# The boards' background re-scorer, as the site runs it (one line per pass: churn_bench reads them).
$PY manage.py refresh_boards -v 2 >"$work/rescorer.log" 2>&1 &
rescorer_pid=$!
$PY -m gunicorn -c site/gunicorn.conf.py --workers 2 --threads 1 --access-logfile /dev/null \
  --bind "127.0.0.1:$web_port" config.wsgi >"$work/gunicorn.log" 2>&1 &
gunicorn_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$web_port/" && break; sleep 0.2; done
if [ -z "${CHURN_ONLY:-}" ]; then
  echo "== HTTP: gunicorn, 2 workers, production settings; $REPEAT sequential requests per URL after warm-up"
  $PY benchmarks/web/http_bench.py --base "http://127.0.0.1:$web_port" --urls "$work/urls.txt" --cookie "$cookie" --repeat "$REPEAT"
fi
echo "== boards while results land: at rest, 1, 5 and 50 evaluations stored per second (attempts.claim + store_result)"
# shellcheck disable=SC2086  # CHURN_RATES: the write rates, as separate words ("1 5 50" by default)
# WRITER_NICE: the writers' Python niced (they stand for GPU hosts; their database work is not niced)
$PY benchmarks/web/churn_bench.py --base "http://127.0.0.1:$web_port" --py "$PY" --repeat "$REPEAT" \
  --rescorer-log "$work/rescorer.log" --rescorer-pid "$rescorer_pid" --rates ${CHURN_RATES:-1 5 50} \
  --writer-nice "${WRITER_NICE:-0}"
kill $gunicorn_pid
if [ -z "${CHURN_ONLY:-}" ]; then
  echo "== writes"
  $PY -m benchmarks.web.bench writes
fi
echo "== the stored boards after the run, against a fresh computation (VERIFY_SAMPLE runs at random and as many re-scored last; runs still marked re-scored first)"
$PY manage.py rebuild_boards --verify-only --sample "${VERIFY_SAMPLE:-200}" | grep -v "^verified [0-9]"
