#!/usr/bin/env bash
# Start a Redis of this site's own (site/local-redis.sh: never one another process already runs), one
# RQ worker for the CPU queue, the boards' background re-scorer and gunicorn; stop them all on
# Ctrl-C. The worker and the re-scorer run under a small supervisor loop: when one exits it is
# started again (after 1, 2, 4 ... up to 30 s), as compose's `restart: unless-stopped` and
# systemd's `Restart=` do in production.
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
  WORKER=("$PY" manage.py evalworker --queue eval-cpu)
else
  WORKER=("$PY" manage.py rqworker eval-cpu)
fi
supervise() {  # supervise NAME LOG COMMAND...: run COMMAND, and again whenever it exits
  local name=$1 log=$2 child="" delay=1 started
  shift 2
  trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" || true; fi; exit 0' TERM INT
  while true; do
    started=$SECONDS
    "$@" >>"$log" 2>&1 &
    child=$!
    wait "$child" && status=0 || status=$?
    child=""
    [ $((SECONDS - started)) -ge 60 ] && delay=1  # it ran a while: start again soon
    echo "The $name exited (status $status); restarting it in ${delay} s (log: $log)"
    sleep "$delay" & wait $!
    delay=$((delay * 2 > 30 ? 30 : delay * 2))
  done
}
# The re-scorer below keeps the boards current: the web and the worker only mark the runs they change.
# It also keeps the standard boards built; SITE_URL is the address their API links name.
export BOARD_RESCORER=1 SITE_URL=${SITE_URL:-http://127.0.0.1:$PORT}
: >"$RUN_DIR/worker.log"
supervise worker "$RUN_DIR/worker.log" "${WORKER[@]}" &
pids+=($!)
echo "Worker for queue eval-cpu, restarted whenever it exits (log: $RUN_DIR/worker.log)"
: >"$RUN_DIR/rescorer.log"
supervise re-scorer "$RUN_DIR/rescorer.log" "$PY" manage.py refresh_boards &
pids+=($!)
echo "The boards' re-scorer, restarted whenever it exits (log: $RUN_DIR/rescorer.log)"

"$PY" -m gunicorn config.wsgi --config site/gunicorn.conf.py --bind "127.0.0.1:$PORT" &
pids+=($!)
echo "Serving http://127.0.0.1:$PORT/  (admin: http://127.0.0.1:$PORT/admin/; Ctrl-C stops everything)"
# Ask once for the boards a newcomer opens first, so that their first visit is a cache read (a board
# nobody asked for is built in its first request; the re-scorer keeps the standard ones built too).
"$PY" - "$PORT" >/dev/null 2>&1 <<'WARM' &
import sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for path in ["/", "/levels/all/", "/levels/1/", "/levels/2/", "/levels/3/", "/levels/4/", "/levels/1/grid/"]:
    for _ in range(60):  # the server is starting, then each board builds: a second or two each
        try:
            urllib.request.urlopen(base + path, timeout=30)
            break
        except Exception:
            time.sleep(0.5)
WARM
wait -n "${pids[@]}"
echo "Redis or the web server exited; stopping the others."
