# Sourced by the GPU host's scripts (gpu_check.sh, gpu_field_verify.sh, gpu_worker_run.sh): start the
# carried redis-server (.redis/, made by benchmarks/gpu/carry.sh) on a free port, export REDIS_URL,
# and define stop_redis for the script's exit trap (the daemon would outlive the script otherwise).
# Needs PY (a python3) set.
R=$PWD/.redis/root
# Fail at once when the carry is missing: a loop waiting on a server that never starts would hold the
# device call until its limit.
[ -x "$R/usr/bin/redis-server" ] || { echo "carried_redis: no $R/usr/bin/redis-server (run benchmarks/gpu/carry.sh here, carry .redis)" >&2; exit 3; }
redis() { LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu "$R/usr/bin/$1" "${@:2}"; }  # redis PROGRAM ARGS...: a carried program
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p /tmp/kb-redis
redis redis-server --port "$port" --bind 127.0.0.1 \
  --save '' --appendonly no --dir /tmp/kb-redis --daemonize yes >/dev/null
tries=0
until redis redis-cli -p "$port" ping >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -lt 200 ] || { echo "carried_redis: redis-server on $port did not answer in 10 s" >&2; exit 3; }
  sleep 0.05
done
export REDIS_URL=redis://127.0.0.1:$port/0
stop_redis() {
  redis redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
}
