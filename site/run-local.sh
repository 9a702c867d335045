#!/usr/bin/env bash
# Start Redis, one RQ worker for the CPU queue and gunicorn; stop all three on Ctrl-C.
set -euo pipefail
PY=${PY:-.venv/bin/python}
PORT=${PORT:-8000}
REDIS_PORT=${REDIS_PORT:-6379}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}
RUN_DIR=var/run
mkdir -p "$RUN_DIR"
pids=()

stop_all() {
  trap - INT TERM EXIT
  echo; echo "Stopping: ${pids[*]:-nothing}"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all INT TERM EXIT

if redis-cli -u "$REDIS_URL" ping >/dev/null 2>&1; then
  echo "Redis already answers at $REDIS_URL; using it."
else
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$RUN_DIR" >"$RUN_DIR/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  echo "Redis on 127.0.0.1:$REDIS_PORT (log: $RUN_DIR/redis.log)"
fi

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
