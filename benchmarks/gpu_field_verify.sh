#!/usr/bin/env bash
# Re-measure (part of) the field on a bare GPU host through the site's own path: Redis, a throwaway
# SQLite database, `manage.py evalworker` (RQ workers + the look-ahead builder), driven by
# `import_kernelbench_leaderboard --verify`. Each call imports the previous results file first, so it
# goes on where the last one stopped; it stops the workers cleanly before FIELD_BUDGET_S and exports
# every evaluation measured so far to $OUT/<card>_results.jsonl (figures only, no code: docs/field.md).
#
# Carried with the checkout (all git-ignored): .whl/ and .redis/ (as benchmarks/gpu_worker_run.sh),
# and the leaderboard's checkout at $FIELD_CHECKOUT (default .field/KernelBenchLeaderboard), whose
# kernels are the code to evaluate (it is never committed). The previous results: data/field/<card>_results.jsonl.
# The card (h200, h100) is the GPU's, as nvidia-smi names it, or FIELD_HARDWARE: the results say which
# card measured them, and a file of one card never goes on with another's.
#
# Environment: FIELD_BUDGET_S (480: seconds for the whole script), FIELD_LEVELS ("1 2 3 4"),
# FIELD_LIMIT (kernels to queue this call; default all not yet measured), FIELD_PROBLEMS (only these
# problems' kernels, as LEVEL/NUMBER words: "1/50"), FIELD_COMMIT (the
# checkout's commit), FIELD_RESULTS (the previous results file; refused if other code measured any of
# it, unless FIELD_MIX_CODE=1), FIELD_CODE_COMMIT (the commit each
# result names as the code that measured it; default this checkout's), PY (python3), SKIP_INSTALL=1.
set -euo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/kb-field-out}
BUDGET=${FIELD_BUDGET_S:-480}
RESERVE=${FIELD_EXPORT_RESERVE_S:-45}  # stop the workers this long before the budget ends
# With FIELD_PROBLEMS and no FIELD_LEVELS, every level (the two filters are both applied).
LEVELS=${FIELD_LEVELS:-1 2 3 4}
CHECKOUT=${FIELD_CHECKOUT:-.field/KernelBenchLeaderboard}
COMMIT=${FIELD_COMMIT:-170ca7965f53bba599d1078b6fcaa5dd2658ec50}
HW=${FIELD_HARDWARE:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -o 'H[0-9]00' | tr H h)}
[ -n "$HW" ] || { echo "gpu_field_verify: which card is this? (no H100/H200 in nvidia-smi; set FIELD_HARDWARE)" >&2; exit 2; }
HW_NAME="NVIDIA ${HW^^}"
PREVIOUS=${FIELD_RESULTS:-data/field/${HW}_results.jsonl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
say() { printf '[%4ss] %s\n' "$(elapsed)" "$*" | tee -a "$OUT/field_verify.log"; }

if [ -z "${SKIP_INSTALL:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site SERVES_PAGES=0  # no pages here: plotly is not carried
  say "wheels installed"
fi

# A pass is one code's: a results file that other code began is not gone on with (FIELD_MIX_CODE=1 to
# do it anyway; benchmarks/gpu/in_tree.sh runs the pass's own tree).
if [ -s "$PREVIOUS" ] && [ -z "${FIELD_MIX_CODE:-}" ]; then
  if ! "$PY" benchmarks/field_runs.py other-code "$PREVIOUS" 2>&1 | tee -a "$OUT/field_verify.log"; then
    say "stopped: $PREVIOUS was measured by other code than this checkout's"
    exit 3
  fi
fi

source benchmarks/gpu/carried_redis.sh
WORKER=""
cleanup() {
  if [ -n "$WORKER" ] && kill -0 "$WORKER" 2>/dev/null; then kill -KILL -- "-$WORKER" 2>/dev/null || true; fi
  stop_redis
}
trap cleanup EXIT
say "redis on $port; card $HW ($HW_NAME), results go on from $PREVIOUS"

export KB_VAR_DIR=/tmp/kb-var DATABASE_URL=sqlite:////tmp/kb-field.sqlite3
# Each result names the code that measured it (evaluation.results.harness_id): the digest always, this commit
# where the caller names it (the device's copy of the checkout may have no git history).
export KB_HARNESS_COMMIT=${FIELD_CODE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || true)}
# 16 cores: builds use ~1.5 cores each (nvcc and the wrapper in parallel); 10 keep the GPU fed.
export EVAL_BUILD_WORKERS=${EVAL_BUILD_WORKERS:-10} EVAL_BUILD_AHEAD=${EVAL_BUILD_AHEAD:-24}
rm -f /tmp/kb-field.sqlite3
M() { "$PY" manage.py "$@"; }
M migrate -v0 --noinput
M shell -c "from problems.models import Hardware; Hardware.objects.get_or_create(slug='$HW', defaults={'name': '$HW_NAME'})"
M import_kernelbench_leaderboard "$CHECKOUT" --commit "$COMMIT" --hardware "$HW" | tee -a "$OUT/field_verify.log"
M import_results "$PREVIOUS" --missing-ok | tee -a "$OUT/field_verify.log"
which=(); [ -n "${FIELD_LIMIT:-}" ] && which=(--limit "$FIELD_LIMIT")
# shellcheck disable=SC2206  # FIELD_PROBLEMS is a list of words
[ -n "${FIELD_PROBLEMS:-}" ] && which+=(--problems $FIELD_PROBLEMS)
# shellcheck disable=SC2086  # LEVELS is a list of words
M import_kernelbench_leaderboard "$CHECKOUT" --commit "$COMMIT" --hardware "$HW" --verify --levels $LEVELS "${which[@]}" \
  | grep -E "verify:|runs," | tee -a "$OUT/field_verify.log"

setsid "$PY" manage.py evalworker --queue "eval-$HW" --device cuda > "$OUT/evalworker.log" 2>&1 &
WORKER=$!
say "evalworker $WORKER started"
# The GPU's busy share while the worker runs (one sample a second; the sampler ends with the script).
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -l 1 > "$OUT/gpu_util.csv" 2>/dev/null &
SAMPLER=$!
pending() { M shell -c "from leaderboard.models import Evaluation; print(Evaluation.objects.pending().count())" 2>/dev/null | tail -1; }
while :; do
  sleep 10
  left=$(pending)
  say "pending: $left"
  if [ "$left" = "0" ]; then say "all queued kernels measured"; break; fi
  if [ "$(elapsed)" -ge $(( BUDGET - RESERVE )) ]; then say "budget nearly spent: stopping the workers"; break; fi
  kill -0 "$WORKER" 2>/dev/null || { say "evalworker exited (see evalworker.log)"; break; }
done
kill -TERM -- "-$WORKER" 2>/dev/null || true
for _ in $(seq 1 40); do kill -0 "$WORKER" 2>/dev/null || break; sleep 0.5; done
kill -KILL -- "-$WORKER" 2>/dev/null || true
WORKER=""
kill "$SAMPLER" 2>/dev/null || true
say "workers stopped"
# The instruments' share of the worker's job time (their follow-ups beside the evaluations).
"$PY" -c "
import json, sys
from benchmarks.gpu_check import job_seconds_from_log
jobs = job_seconds_from_log(open(sys.argv[1]).read())
total = sum(jobs.values())
print('worker jobs:', json.dumps({**{k: round(v, 1) for k, v in jobs.items()}, 'instruments_share': round(jobs['instruments'] / total, 3) if total else None}))
" "$OUT/evalworker.log" | tee -a "$OUT/field_verify.log" || true

M export_results --hardware "$HW" --problem-set kernelbench-leaderboard --out "$OUT/${HW}_results.jsonl" | tee -a "$OUT/field_verify.log"
M shell -c "
from collections import Counter
from leaderboard.models import Evaluation
done = Evaluation.objects.filter(hardware__slug='$HW', state='done', origin='measured').select_related('kernel__run__model', 'kernel__problem')
rows = Counter((e.kernel.run.model.name, e.kernel.problem.level, e.status) for e in done)
for key, n in sorted(rows.items()): print(*key, n, sep='\t')
" | tee "$OUT/field_status.tsv"
# What failed here, and why (the harness's own messages, no code), and the stages' seconds.
M shell -c "
from leaderboard.models import Evaluation
done = Evaluation.objects.filter(hardware__slug='$HW', state='done', origin='measured').select_related('kernel__run__model', 'kernel__problem')
for e in done.order_by('kernel__problem__level', 'kernel__problem__number'):
    k = e.kernel
    first = (e.error or '').strip().splitlines()
    print(k.run.model.name, k.problem.level, k.problem.number, k.problem.name, k.source_hash[:12], k.published_speedup,
          e.status, e.correct, e.speedup, e.speedup_low, e.speedup_high, ','.join(f.get('code', '') if isinstance(f, dict) else str(f) for f in e.flags or []),
          ';'.join(f'{n}={v:.2f}' for n, v in sorted((e.stage_seconds or {}).items()) if isinstance(v, (int, float))),
          (first[-1] if first else '')[:240].replace(chr(9), ' '), sep=chr(9))
" > "$OUT/field_verdicts.tsv" 2>>"$OUT/field_verify.log" || true
say "done: $(wc -l < "$OUT/${HW}_results.jsonl") lines in $OUT/${HW}_results.jsonl (first line: header)"
