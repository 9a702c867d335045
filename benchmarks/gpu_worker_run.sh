#!/usr/bin/env bash
# A GPU worker on a bare GPU host (the `device` machine): Redis and the Python packages travel
# with the checkout (.redis/ and .whl/, both git-ignored; see docs/workers.md), the database is a
# throwaway SQLite file. Prints the time of each stage, then the throughput benchmark's figures.
#   bash benchmarks/gpu_worker_run.sh [KERNELS] [SCALE]
set -euo pipefail
KERNELS=${1:-4}
SCALE=${2:-16}
OUT=${OUT:-/tmp/kb-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
stage() { printf '%-34s %6.1f s\n' "$1" "$(python3 -c "import time; print(time.time() - $2)")"; }

t=$(python3 -c 'import time; print(time.time())')
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
stage "install wheels" "$t"

t=$(python3 -c 'import time; print(time.time())')
R=$PWD/.redis/root
export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/kb-redis
"$R/usr/bin/redis-server" --port 6379 --bind 127.0.0.1 --save '' --appendonly no --dir /tmp/kb-redis --daemonize yes >/dev/null
until "$R/usr/bin/redis-cli" -p 6379 ping >/dev/null 2>&1; do sleep 0.05; done
export REDIS_URL=redis://127.0.0.1:6379/0
stage "start redis-server" "$t"
unset LD_LIBRARY_PATH  # the worker and the kernels must not load Debian's libraries

t=$(python3 -c 'import time; print(time.time())')
python3 -c 'import json; from evaluation import probe_hardware; print(json.dumps(probe_hardware("cuda")))' | tee "$OUT/probe.json"
stage "hardware probe (child process)" "$t"

export KB_VAR_DIR=/tmp/kb-var
python3 benchmarks/worker_throughput.py --device cuda --scale "$SCALE" --kernels "$KERNELS" 2>&1 | tee "$OUT/throughput.txt"
