#!/usr/bin/env bash
# Launch-bound references against themselves, through the library (no worker, no builds): each
# problem's reference as the kernel, evaluated REPEATS times, each evaluation in fresh processes. Shows
# whether the device-time figures hold from process to process (self speedup ~1, retries of the
# device calls' GPU-side wait) and what the parent's clock sees beyond each process's report for
# identical code (the noise a GPU parent-clock bound must allow). Prints one compact JSON line each.
# Carried: .whl (Django, to read the field's problems) and .field/KernelBenchLeaderboard.
#   device run: SELFCHECK_BUDGET_S=170 bash benchmarks/gpu/launch_selfcheck.sh
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/kb-launch-selfcheck}
BUDGET=${SELFCHECK_BUDGET_S:-170}
REPEATS=${SELFCHECK_REPEATS:-2}
PROBLEMS=${SELFCHECK_PROBLEMS:-"2_14 2_9 2_56 1_97 2_51 2_29 1_12"}
mkdir -p "$OUT"
START=$(date +%s)
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
# SERVES_PAGES=0: no pages here, and plotly is not carried.
export PYTHONPATH=/tmp/site SERVES_PAGES=0 KB_VAR_DIR=/tmp/kb-var DATABASE_URL=sqlite:////tmp/kb-selfcheck.sqlite3
rm -f /tmp/kb-selfcheck.sqlite3
"$PY" manage.py migrate -v0 --noinput
"$PY" manage.py shell -c "from problems.models import Hardware; Hardware.objects.get_or_create(slug='h200', defaults={'name': 'NVIDIA H200'})"
"$PY" manage.py import_kernelbench_leaderboard .field/KernelBenchLeaderboard --hardware h200 > "$OUT/import.log" 2>&1
"$PY" manage.py shell -c "
from problems.models import Problem
for key in '$PROBLEMS'.split():
    lvl, num = map(int, key.split('_'))
    p = Problem.objects.filter(level=lvl, number=num).first()
    open(f'/tmp/p{key}.py', 'w').write(p.source)
    open(f'/tmp/k{key}.py', 'w').write(p.source.replace('class Model(', 'class ModelNew(').replace('super(Model,', 'super(ModelNew,'))
"
: > "$OUT/launch_selfcheck.jsonl"
for rep in $(seq 1 "$REPEATS"); do
  for pk in $PROBLEMS; do
    [ $(( $(date +%s) - START )) -ge "$BUDGET" ] && { echo "budget spent before $pk (repeat $rep)"; break 2; }
    timeout 60 "$PY" -m evaluation evaluate --problem /tmp/p$pk.py --kernel /tmp/k$pk.py --device cuda --json 2>>"$OUT/stderr.log" \
      | "$PY" -c "
import json, sys
d = json.load(sys.stdin); dev = d.get('device') or {}
keep = {k: dev.get(k) for k in ('reference_ms', 'kernel_ms', 'speedup', 'speedup_interval', 'reference_dispatch_ms',
        'kernel_dispatch_ms', 'host_bound', 'device_calls_dispatch_ms', 'device_calls_retried', 'device_calls_unheld')}
print(json.dumps({'problem': '$pk', 'repeat': $rep, 'status': d.get('status'), 'speedup': d.get('speedup'),
                  'interval': d.get('speedup_interval'), 'flags': [f['code'] for f in d.get('flags', [])],
                  'reference_ms': (d.get('reference_ms') or {}).get('median'), 'kernel_ms': (d.get('kernel_ms') or {}).get('median'),
                  'unaccounted_ms': [(d.get('reference_ms') or {}).get('unaccounted_ms'), (d.get('kernel_ms') or {}).get('unaccounted_ms')],
                  'device': keep, 'timings_s': d.get('timings_s'),
                  'rounds': (d.get('environment') or {}).get('timing_rounds')}))" | tee -a "$OUT/launch_selfcheck.jsonl"
  done
done
echo "launch_selfcheck: $(wc -l < "$OUT/launch_selfcheck.jsonl") evaluations in $(( $(date +%s) - START )) s"
