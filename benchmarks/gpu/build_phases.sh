#!/usr/bin/env bash
# Where a CUDA build's time goes on the GPU host, and what each candidate cut of the `.cu` compile
# saves with the kernel's outputs bitwise the same (benchmarks/gpu/build_phases.py says how).
# Run from the repository root on a bare GPU host (torch, nvcc, ninja; no Django), carrying the
# field checkout `.field/KernelBenchLeaderboard`:
#     OUT=/some/folder bash benchmarks/gpu/build_phases.sh
# Environment: OUT (/tmp/kb-build-phases), BUILD_PHASES_BUDGET_S (150: the driver stops cleanly
# within it), BUILD_PHASES_SLOTS (compiles at once: cores - 4), PY (python3).
# Writes $OUT/build_phases.json (everything), $OUT/build_phases.txt (the table), $OUT/build_phases.log.
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/kb-build-phases}
BUDGET=${BUILD_PHASES_BUDGET_S:-150}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 BUILD_PHASES_BUDGET_S="$BUDGET"
{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo "${BUILD_PHASES_COMMIT:-unknown}")"
  echo "started: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  nvcc --version 2>&1 | tail -2
  command -v ninja || echo "no ninja on PATH"
} > "$OUT/build_phases.log" 2>&1
# A hard stop past the driver's own budget: whatever hangs is killed, the log says so.
timeout -k 10 $(( BUDGET + 60 )) "$PY" benchmarks/gpu/build_phases.py "$OUT" 2>&1 | tee -a "$OUT/build_phases.log" \
  | sed -n '/^kernel /,$p' > "$OUT/build_phases.txt"
rc=${PIPESTATUS[0]}
echo "build_phases.sh: driver exit $rc at $(date -u +%FT%TZ)" | tee -a "$OUT/build_phases.log"
# The work folder (objects, libraries) stays on the host: only the figures come back.
rm -rf "$OUT/work"
exit 0
