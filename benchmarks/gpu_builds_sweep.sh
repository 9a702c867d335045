#!/usr/bin/env bash
# Issue 27 on a bare GPU host (no Django): builds before and after the header cuts, then a cold sweep
# of the 110-kernel corpus (docs/measurements.md, "Builds in seconds: measurements").
#
#   bash benchmarks/gpu_builds_sweep.sh start     # GPU tests of the cuts, build_times.py, then the
#                                                 # cold corpus sweep started in the background (setsid)
#   bash benchmarks/gpu_builds_sweep.sh collect   # wait for that sweep (WAIT_S), copy its results to $OUT
#   bash benchmarks/gpu_builds_sweep.sh sweep     # only the cold sweep, started and collected in one call
#
# The corpus is laid out beforehand (python benchmarks/kernel_corpus.py .run/corpus) and carried
# (carry: [".run/corpus"]); CORPUS names it. The sweep's work stays in /tmp/kb27 between the two
# calls (the machine must still be warm: call `collect` at once). Environment: CORPUS, OUT, WAIT_S
# (540), BUILD_LIMIT (10 kernels for build_times.py), SWEEP_ARGS (extra arguments for the sweep).
set -uo pipefail
CORPUS=${CORPUS:-.run/corpus}
OUT=${OUT:-/tmp/kb27-out}
WORK=/tmp/kb27
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

start() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/host.txt"
  nproc >> "$OUT/host.txt"
  python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' >> "$OUT/host.txt"
  echo "== GPU tests of the header cuts"
  python3 -m pytest --noconftest -p no:cacheprovider -o addopts= -q -s -n 3 \
    tests/evaluation/test_slim_headers.py tests/evaluation/test_pch.py -k "cuda or frontend or slim or routes" \
    2>&1 | tail -25 | tee "$OUT/gpu_tests.txt"
  echo "== build_times.py: the corpus's CUDA kernels, before and after"
  python3 benchmarks/build_times.py --device cuda --kernels "$CORPUS/kernels" --limit "${BUILD_LIMIT:-10}" \
    --budget-s 420 --out "$OUT/build_times" > "$OUT/build_times.txt" 2>&1
  tail -8 "$OUT/build_times.txt"
  cp "$OUT/build_times/build_times.json" "$OUT/build_times.json"
  rm -rf "$OUT/build_times"
  start_sweep
}

start_sweep() {
  echo "== the cold corpus sweep, in the background"
  rm -rf "$WORK/cache" && mkdir -p "$WORK/cache"
  setsid nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -l 1 > "$WORK/gpu_util.csv" 2>/dev/null &
  echo $! > "$WORK/sampler.pid"
  # shellcheck disable=SC2086  # SWEEP_ARGS is a list of words
  KB_BUILD_CACHE=$WORK/cache setsid python3 -m evaluation sweep "$CORPUS/problems" --kernels "$CORPUS/kernels" \
    --device cuda --out "$WORK/sweep.jsonl" --json ${SWEEP_ARGS:-} > "$WORK/summary.json" 2> "$WORK/sweep.log" &
  echo $! > "$WORK/sweep.pid"
  setsid bash -c "while kill -0 $(cat "$WORK/sweep.pid") 2>/dev/null; do sleep 1; done; kill $(cat "$WORK/sampler.pid")" \
    >/dev/null 2>&1 &
  sleep 5; echo "sweep $(cat "$WORK/sweep.pid") running"
}

collect() {
  local waited=0 limit=${WAIT_S:-540}
  while kill -0 "$(cat "$WORK/sweep.pid")" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
    sleep 10; waited=$((waited + 10))
    echo "[$waited s] $(wc -l < "$WORK/sweep.jsonl" 2>/dev/null || echo 0) evaluations"
  done
  kill -0 "$(cat "$WORK/sweep.pid")" 2>/dev/null && echo "the sweep is still running: results so far"
  cp "$WORK/sweep.jsonl" "$WORK/summary.json" "$WORK/gpu_util.csv" "$OUT/" 2>/dev/null
  tail -c 200000 "$WORK/sweep.log" > "$OUT/sweep.log"
  python3 -c "import json,sys; s=json.loads(open('$WORK/summary.json').read().splitlines()[-1]); print(json.dumps({k: s.get(k) for k in ('evaluations','minutes','gpu_busy_share','gpu_held_median_s','build_median_s','build_p90_s','stage_seconds','statuses')}, indent=1))" 2>/dev/null
}

sweep() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/host.txt"
  start_sweep
  collect
}

"${1:-start}"
