#!/usr/bin/env bash
# The 250-problem self-check on one GPU, in parts that resume: each call measures, within its
# budget, the problems of levels 1-3 that benchmarks/results/h200_selfcheck250/ does not yet hold.
#   here, once:  KB_MIRROR=/work/.mirror/ScalingIntelligence+KernelBench/repo bash benchmarks/gpu/carry.sh
#   device run:  SELFCHECK_BUDGET_S=540 bash benchmarks/gpu/selfcheck250.sh   (carry: [".field/KernelBench"])
#   then here:   copy $OUT/selfcheck250.jsonl to benchmarks/results/CARD_selfcheck250/partN.jsonl
# A self-check compares a card with itself, so each card keeps its own parts: CARD is h200 or h100
# (SELFCHECK_DONE names another folder).
# No Django: the library alone (`python -m evaluation sweep`, its default settings).
set -uo pipefail
OUT=${OUT:-/tmp/kb-selfcheck250}
KB=${KB_DIR:-.field/KernelBench}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -o 'H[0-9]00' | tr H h)
DONE=${SELFCHECK_DONE:-benchmarks/results/${card:-gpu}_selfcheck250}
mkdir -p "$OUT"
[ -d "$KB/level1" ] || { echo "selfcheck250: no KernelBench problems at $KB (carry.sh with KB_MIRROR)"; exit 2; }
left=$(python3 benchmarks/selfcheck_parts.py remaining "$KB" "$DONE")
# SELFCHECK_ONLY (names `levelL/NAME`, space-separated): of those left, measure only these, e.g. the
# problems another code's parts found outside 2 % (`selfcheck_parts.py outside DIR`).
if [ -n "${SELFCHECK_ONLY:-}" ]; then
  left=$(for name in $left; do case " $SELFCHECK_ONLY " in *" $name "*) printf '%s ' "$name" ;; esac; done)
fi
echo "selfcheck250: $(wc -w <<< "$left") of 250 problems left on ${card:-an unnamed card} ($DONE); budget ${SELFCHECK_BUDGET_S:-540} s"
# The parts this checkout holds: a call made before the last call's file was committed as a part
# measures that call's problems again (2026-12-06, part 3).
echo "selfcheck250: going on from $(cd "$DONE" 2>/dev/null && ls -- *.jsonl *.jsonl.gz 2>/dev/null | tr '\n' ' ')"
[ -n "$left" ] || exit 0
# A sweep cut at the last call's budget may leave a sandbox finishing its timing loop on this host
# (its own session: the interrupt does not reach it). Wait for the GPU to hold no process, up to
# 30 s, and say what is still there: the first problem of a call 20 s after such a cut read 1.267.
gpu_apps() { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null; }
for _ in $(seq 30); do [ -z "$(gpu_apps)" ] && break; sleep 1; done
still=$(gpu_apps | tr '\n' ';')
command -v nvidia-smi >/dev/null || still="unknown (no nvidia-smi)"
echo "selfcheck250: processes on the GPU at the start: ${still:-none}"
# Partial results survive the budget: the sweep writes each result as it ends. No instruments: a
# self-check asks only whether the timing reads 1.0 (part 1 on the H100, with them, spent 273 of its
# 409 s on them: 22 problems in 420 s).
timeout --signal=INT "${SELFCHECK_BUDGET_S:-540}" python3 -m evaluation sweep "$KB" --levels 1 2 3 \
  --device cuda --instruments none --problems $left --out "$OUT/selfcheck250.jsonl" --json > "$OUT/selfcheck250.log" 2>&1
echo "selfcheck250: sweep exit $?; $(wc -l < "$OUT/selfcheck250.jsonl") results this call"
python3 benchmarks/selfcheck_parts.py summary "$DONE" "$OUT/selfcheck250.jsonl"
