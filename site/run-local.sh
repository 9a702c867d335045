#!/usr/bin/env bash
# Start a Redis of this site's own (site/local-redis.sh: never one another process already runs), one
# RQ worker for the CPU queue and gunicorn; stop all three on Ctrl-C.
set -euo pipefail
PY=${PY:-.venv/bin/python}
PORT=${PORT:-8000}
RUN_DIR=var/run
# shellcheck source=site/local-redis.sh
source "$(dirname "$0")/local-redis.sh"
mkdir -p "$RUN_DIR"
pids=()

stop_all() {
  trap - INT TERM EXIT
  echo; echo "Stopping: ${pids[*]:-nothing}"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all INT TERM EXIT

REDIS_PID=""
start_local_redis "$RUN_DIR" || exit 1
[ -n "$REDIS_PID" ] && pids+=("$REDIS_PID")

if "$PY" manage.py help evalworker >/dev/null 2>&1; then
  "$PY" manage.py evalworker --queue eval-cpu >"$RUN_DIR/worker.log" 2>&1 &
else
  "$PY" manage.py rqworker eval-cpu >"$RUN_DIR/worker.log" 2>&1 &
fi
pids+=($!)
echo "Worker for queue eval-cpu (log: $RUN_DIR/worker.log)"

"$PY" -m gunicorn config.wsgi --config site/gunicorn.conf.py --bind "127.0.0.1:$PORT" &
pids+=($!)
echo "Serving http://127.0.0.1:$PORT/  (admin: http://127.0.0.1:$PORT/admin/; Ctrl-C stops everything)"
wait -n "${pids[@]}"
echo "A process exited; stopping the others."
