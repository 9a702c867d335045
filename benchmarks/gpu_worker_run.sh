#!/usr/bin/env bash
# A GPU worker on a bare GPU host (the `device` machine): Redis and the Python packages travel
# with the checkout (.redis/ and .whl/, both git-ignored; see docs/workers.md), the database is a
# throwaway SQLite file. Prints the time of each stage, then the throughput benchmark's figures.
#   bash benchmarks/gpu_worker_run.sh [benchmark options, e.g. --kernels 4 --scale 16]
# Environment: PY (python3), DEVICE (cuda), SKIP_INSTALL=1 to use the current PYTHONPATH.
set -euo pipefail
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-/tmp/kb-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
now() { "$PY" -c 'import time; print(time.time())'; }
stage() { printf '%-34s %6.1f s\n' "$1" "$("$PY" -c "import time; print(time.time() - $2)")"; }

if [ -z "${SKIP_INSTALL:-}" ]; then
  t=$(now)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site SERVES_PAGES=0  # no pages here: plotly is not carried
  stage "install wheels" "$t"
fi

t=$(now)
source benchmarks/gpu/carried_redis.sh
# The daemon would outlive this script on a shared machine: stop it however the script ends.
trap stop_redis EXIT
stage "start redis-server (Debian 7.0.15)" "$t"

t=$(now)
"$PY" -c "import json; from evaluation import probe_hardware; print(json.dumps(probe_hardware('$DEVICE')))" | tee "$OUT/probe.json"
stage "hardware probe (child process)" "$t"

export KB_VAR_DIR=/tmp/kb-var
t=$(now)
"$PY" benchmarks/worker_throughput.py --device "$DEVICE" "$@" 2>&1 | tee "$OUT/throughput.txt"
stage "benchmark (two rounds, two workers)" "$t"
