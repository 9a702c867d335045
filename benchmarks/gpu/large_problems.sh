#!/usr/bin/env bash
# The self-check (each reference against itself) of KernelBench problems whose inputs fill a tenth of
# an 80 GB card, with each process's GPU memory sampled every 200 ms: on an H100 `38_L1Norm_` and
# `39_L2Norm_` ran out of memory in the reference process while timing and
# `76_conv_standard_1D_dilated_strided__` read a timing_output_mismatch (docs/evaluation.md,
# "Large problems on an 80 GB card").
#   device run: bash benchmarks/gpu/large_problems.sh      (carry .field; writes $OUT/large.tgz)
# The device tool brings back at most 8 files from $OUT: run beside the GPU check, this script's five
# files left the check's summary.json out (2026-12-06, run 18), so they leave packed in one archive.
set -uo pipefail
OUT=${OUT:-/tmp/kb-large}
KB=${KB_DIR:-.field/KernelBench}
PROBLEMS=${LARGE_PROBLEMS:-"level1/38_L1Norm_ level1/39_L2Norm_ level1/76_conv_standard_1D_dilated_strided__"}
mkdir -p "$OUT"
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader -lms 200 > "$OUT/large_memory.csv" 2>&1 &
SAMPLER=$!
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 200 > "$OUT/large_card.csv" 2>&1 &
CARD=$!
trap 'kill $SAMPLER $CARD 2>/dev/null' EXIT
timeout --signal=INT "${LARGE_BUDGET_S:-150}" python3 -m evaluation sweep "$KB" --levels 1 2 3 --device cuda \
  --instruments none --problems $PROBLEMS --out "$OUT/large_results.jsonl" --json > "$OUT/large_sweep.log" 2>&1
echo "large_problems: sweep exit $?"
kill $SAMPLER $CARD 2>/dev/null; wait $SAMPLER $CARD 2>/dev/null
grep -E '^\[' "$OUT/large_sweep.log"
python3 - "$OUT/large_results.jsonl" "$OUT/large_memory.csv" "$OUT/large_card.csv" <<'PY'
import collections, json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    flags = {f["code"]: f["message"] for f in r.get("flags", [])}
    print(r["problem"], r["status"], r.get("speedup"), r.get("error") or "", flags.get("timing_output_mismatch", ""))
peak = collections.Counter()
for row in open(sys.argv[2]):
    parts = [p.strip() for p in row.split(",")]
    if len(parts) == 3 and parts[2].endswith("MiB"):
        peak[parts[1]] = max(peak[parts[1]], int(parts[2].split()[0]))
print("peak MiB per process:", dict(peak.most_common(12)))
used = [int(r.split(",")[1].split()[0]) for r in open(sys.argv[3]) if r.count(",") == 1 and "MiB" in r]
print("peak MiB on the card:", max(used, default=None))
PY
tar -czf "$OUT/large.tgz" -C "$OUT" large_results.jsonl large_memory.csv large_card.csv large_sweep.log \
  && rm -f "$OUT"/large_results.jsonl "$OUT"/large_memory.csv "$OUT"/large_card.csv "$OUT"/large_sweep.log
