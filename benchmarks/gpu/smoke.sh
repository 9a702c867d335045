#!/usr/bin/env bash
# The scoring library on a bare GPU host, in about a minute: what a session short of device time runs
# instead of the full acceptance check (benchmarks/gpu_check.sh). Three evaluations through
# `python -m evaluation evaluate --device cuda`, each in fresh processes: the reference as the kernel
# (flagged fallback_to_reference, timed ~1x), a Triton GELU and a CUDA GELU (a cold build). Each
# result's JSON under $OUT, one summary line each, then which code measured them. Needs nothing carried.
#   device run: bash benchmarks/gpu/smoke.sh
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/kb-smoke}
mkdir -p "$OUT"
export KB_VAR_DIR=/tmp/kb-var KB_BUILD_CACHE=/tmp/kb-smoke-cache
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee "$OUT/gpu.txt"
problem=problems/catalogue/level1/3_GELU.py
sed -e 's/class Model(/class ModelNew(/' -e 's/super(Model,/super(ModelNew,/' "$problem" > /tmp/kb-smoke-reference.py
for kernel in /tmp/kb-smoke-reference.py benchmarks/gpu/kernels/gelu_triton.py benchmarks/gpu/kernels/gelu_cuda.py; do
  name=$(basename "$kernel" .py)
  start=$(date +%s.%N)
  timeout 150 "$PY" -m evaluation evaluate --problem "$problem" --kernel "$kernel" --device cuda --size-scale 32 \
    --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  rc=$?
  "$PY" - "$OUT/$name.json" "$name" "$rc" "$start" <<'PY'
import json, sys, time
path, name, rc, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
try:
    r = json.load(open(path))
except ValueError:
    print(f"{name}: exit {rc}, no JSON"); sys.exit()
env = r.get("environment") or {}
codes = lambda key: ",".join(sorted(f.get("code", "") for f in r.get(key) or [])) or "-"
print(f"{name}: exit {rc}, {r.get('status')}, speedup {r.get('speedup')}, interval {r.get('speedup_interval')}, "
      f"flags {codes('flags')}, notes {codes('notes')}, harness {env.get('harness')}, {time.time() - start:.1f} s")
PY
done
