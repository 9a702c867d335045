# Sourced by site/run-local.sh (and its test): start_local_redis RUN_DIR starts a Redis of this
# checkout's own and exports REDIS_URL (and REDIS_PID); it never joins a Redis that some other process
# already runs, since two sites sharing one would share the eval-cpu queue and the board cache (one
# site's worker would run the other's jobs).
#   REDIS_URL set        used as given: sharing a Redis is then a choice, said out loud.
#   REDIS_PORT set       a Redis of our own on that port; refused (status 1, with why) when it is taken.
#   neither              a Redis of our own on 6379 when free, else on a free port the system gives.

port_taken() {  # something accepts connections on 127.0.0.1:$1
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
  "${PY:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_local_redis() {
  local run_dir=$1 port
  if [ -n "${REDIS_URL:-}" ]; then
    echo "Using the Redis of REDIS_URL=$REDIS_URL as given (its queues and cache are shared with whoever else uses it)."
    return 0
  fi
  if [ -n "${REDIS_PORT:-}" ]; then
    port=$REDIS_PORT
    if port_taken "$port"; then
      echo "REDIS_PORT=$port is taken by another process: refusing to share its queue and cache." >&2
      echo "Free the port, give another REDIS_PORT, leave REDIS_PORT out (a free port is picked), or set REDIS_URL to share that Redis on purpose." >&2
      return 1
    fi
  elif port_taken 6379; then
    port=$(free_port)
    echo "Port 6379 is taken by another process (another checkout's Redis?): starting this site's own Redis on $port instead."
  else
    port=6379
  fi
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$run_dir" >"$run_dir/redis.log" 2>&1 &
  REDIS_PID=$!
  local answered=""
  for _ in $(seq 50); do
    answered=$(redis-cli -p "$port" info server 2>/dev/null | tr -d '\r' | sed -n "s/^process_id://p" || true)
    [ -n "$answered" ] && break
    kill -0 "$REDIS_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$answered" != "$REDIS_PID" ]; then  # it did not start, or another Redis took the port first
    kill -TERM "$REDIS_PID" 2>/dev/null || true
    echo "Could not start a Redis of our own on 127.0.0.1:$port (log: $run_dir/redis.log)${answered:+; another Redis (pid $answered) answers there}." >&2
    return 1
  fi
  export REDIS_URL="redis://127.0.0.1:$port/0" REDIS_PID
  echo "Redis on 127.0.0.1:$port, this site's own (log: $run_dir/redis.log)"
}
