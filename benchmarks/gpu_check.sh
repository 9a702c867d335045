#!/usr/bin/env bash
# The GPU acceptance check (../shared/DESIGN.md, "Contracts"): on a bare GPU host, in one device call
# of at most 9 minutes, a fixed set of field kernels (benchmarks/gpu_check.py CHECK_SET) measured twice
# through the site's own path (Redis, `manage.py evalworker` with its look-ahead builder, SQLite), two
# self-checks through the library, then $OUT/summary.json (commit it to benchmarks/results/gpu_check/).
#
# Carried (git-ignored, made here by benchmarks/gpu/carry.sh): .whl/, .redis/, .field/KernelBenchLeaderboard.
# Leaves in $OUT at most 7 files (import.log and gpu_util.csv packed in logs.tgz at the end).
#   device run: bash benchmarks/gpu_check.sh      (carry .whl .redis .field/KernelBenchLeaderboard: the whole
#   .field, with KernelBench's problems and an older tree, is over the device tool's 64 MiB beside the rest)
# Environment: CHECK_BUDGET_S (530: the two passes and self-checks), EXPLOIT_BUDGET_S (150; 0 skips the
# GPU exploit suite), CHECK_PASS2_ORDER (rotated: pass 2 queues the set's first kernel last), PY (python3).
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/kb-gpu-check}
BUDGET=${CHECK_BUDGET_S:-530}
PASS2_ORDER=${CHECK_PASS2_ORDER:-}
case "$PASS2_ORDER" in
  "" | rotated) ;;
  *) echo "gpu_check: CHECK_PASS2_ORDER is rotated or unset, not '$PASS2_ORDER'" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*" | tee -a "$OUT/check.log"; }

"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "gpu_check: the carried wheels did not install (run benchmarks/gpu/carry.sh here, carry .whl)" >&2; exit 3; }
export PYTHONPATH=/tmp/site SERVES_PAGES=0  # no pages here: plotly is not carried
source benchmarks/gpu/carried_redis.sh
WORKER="" SAMPLER=""
cleanup() {
  [ -n "$WORKER" ] && kill -KILL -- "-$WORKER" 2>/dev/null
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
  stop_redis
}
trap cleanup EXIT
say "wheels installed, redis on $port"

export KB_VAR_DIR=/tmp/kb-var DATABASE_URL=sqlite:////tmp/kb-check.sqlite3 KB_BUILD_CACHE=/tmp/kb-check-cache
export EVAL_BUILD_WORKERS=${EVAL_BUILD_WORKERS:-10} EVAL_BUILD_AHEAD=${EVAL_BUILD_AHEAD:-24}
rm -rf /tmp/kb-check.sqlite3 "$KB_BUILD_CACHE"
M() { "$PY" manage.py "$@"; }
M migrate -v0 --noinput
M shell -c "from problems.models import Hardware; Hardware.objects.get_or_create(slug='h200', defaults={'name': 'NVIDIA H200'})"
M import_kernelbench_leaderboard .field/KernelBenchLeaderboard --hardware h200 > "$OUT/import.log" 2>&1
say "field imported: $(tail -1 "$OUT/import.log")"

nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,clocks.sm --format=csv,noheader,nounits -l 1 > "$OUT/gpu_util.csv" 2>/dev/null &
SAMPLER=$!
setsid "$PY" manage.py evalworker --queue eval-h200 --device cuda > "$OUT/evalworker.log" 2>&1 &
WORKER=$!
say "evalworker $WORKER started"
"$PY" benchmarks/gpu_check.py queue | tee -a "$OUT/check.log"
"$PY" benchmarks/gpu_check.py wait $(( START + BUDGET * 55 / 100 )) | tee -a "$OUT/check.log"
say "pass 1 over"
"$PY" benchmarks/gpu_check.py queue "$PASS2_ORDER" | tee -a "$OUT/check.log"
"$PY" benchmarks/gpu_check.py wait $(( START + BUDGET - 75 )) | tee -a "$OUT/check.log"
say "pass 2 over"
kill -TERM -- "-$WORKER" 2>/dev/null
for _ in $(seq 1 20); do kill -0 "$WORKER" 2>/dev/null || break; sleep 0.5; done
kill -KILL -- "-$WORKER" 2>/dev/null; WORKER=""
say "worker stopped"

# Two self-checks through the library (the reference against itself): a launch-bound and a GPU-bound one.
: > "$OUT/selfcheck.jsonl"
M shell -c "
from problems.models import Problem
for lvl, num in ((2, 14), (1, 12)):
    p = Problem.objects.filter(level=lvl, number=num).first()
    open(f'/tmp/p{lvl}_{num}.py', 'w').write(p.source)
    open(f'/tmp/k{lvl}_{num}.py', 'w').write(p.source.replace('class Model(', 'class ModelNew(').replace('super(Model,', 'super(ModelNew,'))
" 2>>"$OUT/check.log"
for pk in 2_14 1_12; do
  [ "$(elapsed)" -ge $(( BUDGET - 25 )) ] && { say "no time left for self-check $pk"; break; }
  timeout 40 "$PY" -m evaluation evaluate --problem /tmp/p$pk.py --kernel /tmp/k$pk.py --device cuda --instruments none --json \
    | "$PY" -c "import json,sys; d=json.load(sys.stdin); d['problem']='$pk'; d.pop('log',None); print(json.dumps(d))" >> "$OUT/selfcheck.jsonl" 2>>"$OUT/check.log"
done
kill "$SAMPLER" 2>/dev/null; SAMPLER=""
# Every path the check's CUDA builds wrote into build.ninja is in their key (evaluation.builds.entry.key_paths):
# else a checkout or an environment at other paths, sharing the cache, fails those kernels' loads.
"$PY" -c "
import os, sys
from evaluation.builds.entry import paths_outside_key
root = sys.argv[1]
entries = [os.path.join(root, n) for n in sorted(os.listdir(root)) if not n.startswith('.')]
outside = sorted({p for e in entries for p in paths_outside_key(e, 'cuda')})
print(f'build.ninja paths outside the key: {len(outside)} in {len(entries)} entries {outside[:5]}')
" "$KB_BUILD_CACHE" 2>&1 | while read -r line; do say "$line"; done

# The GPU exploit suite (tests/adversarial/test_exploits_gpu.py: side streams, patched events, the
# harness's clock swapped from the kernel's process), within EXPLOIT_BUDGET_S; no Django here, so
# without the suites' conftest files.
EXPLOIT_BUDGET=${EXPLOIT_BUDGET_S:-150}
if [ "$EXPLOIT_BUDGET" -gt 0 ]; then
  say "GPU exploit suite (at most ${EXPLOIT_BUDGET} s)"
  timeout "$EXPLOIT_BUDGET" "$PY" -m pytest --noconftest -p no:cacheprovider -q -rfEs tests/adversarial/test_exploits_gpu.py \
    > "$OUT/gpu_exploits.txt" 2>&1 || echo "exit $? (124: out of time)" >> "$OUT/gpu_exploits.txt"
  say "exploits: $(grep -E 'passed|failed|error' "$OUT/gpu_exploits.txt" | tail -1)"
fi
# The CPU's model too: a build's time follows the host's CPUs (runs 14 and 15, same code: 17.7 and 9.9 s).
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
GPU_CHECK_DEVICE="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(nproc) cores${cpu_model:+, $cpu_model}" \
  "$PY" benchmarks/gpu_check.py summary "$OUT" "$OUT/gpu_util.csv" "$OUT/selfcheck.jsonl" "$OUT/evalworker.log" | tee -a "$OUT/check.log"
say "done"
# The device tool returns at most 8 files from $OUT: the two small raw files go into one archive, so
# that summary.json, the rows, the logs and a stdout.txt the caller may write there all come back
# (run 11's summary.json was left out at 9). Unpack logs.tgz beside them when committing the run.
tar -czf "$OUT/logs.tgz" -C "$OUT" import.log gpu_util.csv && rm -f "$OUT/import.log" "$OUT/gpu_util.csv"
