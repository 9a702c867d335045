#!/usr/bin/env bash
# Pages of two checkouts timed against each other on one already generated database, interleaved so
# that a busy machine weighs on both alike: each checkout served by gunicorn with 2 workers and the
# production settings (as benchmarks/web/run.sh serves one), each with its own Redis database as the
# shared cache, then ROUNDS rounds of benchmarks/web/http_bench.py (REPEAT sequential requests a URL
# after warm-up) on each in turn. Reads only (and one reviewer's session, as run.sh).
#
#   BENCH_DATABASE_URL=postgres://.../kb13m bash benchmarks/web/pages_ab.sh BEFORE_DIR AFTER_DIR [URL...]
set -euo pipefail
before=$1 after=$2
shift 2
PY=${PY:-.venv/bin/python}
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-20}
export DATABASE_URL=$BENCH_DATABASE_URL DJANGO_SETTINGS_MODULE=config.settings_production SECRET_KEY=bench-only
export SECURE_SSL_REDIRECT=0 LOG_LEVEL=WARNING BOARD_RESCORER=1
work=$(mktemp -d /tmp/kb-pages-ab.XXXXXX)
touch "$work/pids"  # a file, not an array: `serve` runs in a command substitution's subshell
# shellcheck disable=SC2046  # one process id a word
trap 'kill $(cat "$work/pids") 2>/dev/null || true; sleep 1; rm -rf "$work"' EXIT
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
echo $! >>"$work/pids"
serve() {  # checkout, name, Redis database: starts its gunicorn, prints its port
  local port
  port=$(free_port)
  mkdir -p "$work/$2/var"
  (cd "$1" && REDIS_URL="redis://127.0.0.1:$redis_port/$3" STATIC_ROOT="$work/$2/static" KB_VAR_DIR="$work/$2/var" \
    $PY manage.py collectstatic --noinput -v0 &&
    REDIS_URL="redis://127.0.0.1:$redis_port/$3" STATIC_ROOT="$work/$2/static" KB_VAR_DIR="$work/$2/var" \
    exec $PY -m gunicorn -c site/gunicorn.conf.py --workers 2 --threads 1 --access-logfile /dev/null \
      --bind "127.0.0.1:$port" config.wsgi) >"$work/$2.log" 2>&1 &
  echo $! >>"$work/pids"
  for _ in $(seq 150); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
  echo "$port"
}
port_before=$(serve "$before" before 0)
port_after=$(serve "$after" after 1)
if [ $# -gt 0 ]; then printf '%s\n' "$@" >"$work/urls.txt"; else $PY -m benchmarks.web.bench urls >"$work/urls.txt"; fi
cookie=$($PY -m benchmarks.web.bench session)
echo "before: $before ($(git -C "$before" rev-parse --short HEAD)); after: $after ($(git -C "$after" rev-parse --short HEAD))"
for round in $(seq "$ROUNDS"); do
  for side in before after; do
    port=$port_before
    [ "$side" = after ] && port=$port_after
    echo "== round $round, $side ($(cut -d' ' -f1-3 /proc/loadavg) load)"
    $PY benchmarks/web/http_bench.py --base "http://127.0.0.1:$port" --urls "$work/urls.txt" --cookie "$cookie" \
      --repeat "$REPEAT" --concurrent-urls
  done
done
