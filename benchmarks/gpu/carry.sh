#!/usr/bin/env bash
# Prepare, here, what a bare GPU host needs to run the site's worker path (all git-ignored):
#   .whl/    cp312 wheels the GPU image lacks (Django, DRF, RQ, Redis client, ...; not plotly: the GPU
#            host serves no pages, and its scripts set SERVES_PAGES=0);
#   .redis/  Debian 12's redis-server unpacked (apt-get download + dpkg -x);
#   .field/KernelBenchLeaderboard  the field's kernels (a checkout made with the `fetch` tool; its
#            code is never committed), when FIELD_MIRROR names the fetched git directory;
#   .field/tree-<commit>.tar.gz  the repository at FIELD_TREE_COMMIT, when set (benchmarks/gpu/in_tree.sh);
#   .field/evaluation-<commit>.tar.gz  evaluation/ at FIELD_EVALUATION_COMMIT, when set (in_tree.sh --overlay);
#   .field/KernelBench/level{1,2,3}  KernelBench's problems, when KB_MIRROR names the fetched git directory.
# Run from the repository root. Idempotent: what exists is kept.
set -euo pipefail
# The venv's own versions (make setup), so the GPU host runs what the tests ran here.
NAMES='^(django|asgiref|sqlparse|djangorestframework|drf-spectacular|drf-spectacular-sidecar|jsonschema|jsonschema-specifications|jsonschema_rs|referencing|rpds-py|attrs|uritemplate|inflection|django-rq|rq|croniter|python-dateutil|redis|dj-database-url|whitenoise|prometheus_client|pyyaml|pygments|click|six)=='
WHEELS=$(.venv/bin/pip freeze 2>/dev/null | grep -iE "$NAMES")
grep -qx '/.redis/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; printf '/.redis/\n/.whl/\n/.field/\n/.gpucheck/\n' >> .git/info/exclude; }
rm -f .whl/plotly-*.whl .whl/narwhals-*.whl  # carried before SERVES_PAGES=0: 10 MB of the 64 MiB
if [ ! -f .whl/.complete ]; then
  mkdir -p .whl
  for w in $WHEELS; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform any -d .whl "$w" || python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: -d .whl "$w"
  done
  touch .whl/.complete
fi
if [ ! -x .redis/root/usr/bin/redis-server ]; then
  mkdir -p .redis/debs .redis/root
  (cd .redis/debs && apt-get download redis-server redis-tools liblzf1 libjemalloc2 libatomic1)
  for f in .redis/debs/*.deb; do dpkg -x "$f" .redis/root; done
  rm -rf .redis/debs
fi
if [ -n "${FIELD_MIRROR:-}" ] && [ ! -d .field/KernelBenchLeaderboard ]; then
  mkdir -p .field && git clone -q "$FIELD_MIRROR" .field/KernelBenchLeaderboard
fi
# KernelBench's problems of levels 1-3 (benchmarks/gpu/selfcheck250.sh), from the fetched git directory.
if [ -n "${KB_MIRROR:-}" ] && [ ! -d .field/KernelBench/level1 ]; then
  mkdir -p .field/KernelBench
  git --git-dir="$KB_MIRROR" archive HEAD KernelBench/level1 KernelBench/level2 KernelBench/level3 \
    | tar -x -C .field/KernelBench --strip-components=1
fi
# The tree of an earlier commit, for a measurement that must go on with the code it began with
# (benchmarks/gpu/in_tree.sh runs a command in it on the GPU host).
if [ -n "${FIELD_TREE_COMMIT:-}" ]; then
  tree=.field/tree-$(git rev-parse --short "$FIELD_TREE_COMMIT").tar.gz
  [ -f "$tree" ] || { mkdir -p .field && git archive --format=tar.gz -o "$tree" "$FIELD_TREE_COMMIT"; }
  echo "carry: $tree"
fi
# The evaluation library of an earlier commit, for a pass that must go on with the code it began with
# while the site's code moves on (benchmarks/gpu/in_tree.sh --overlay).
if [ -n "${FIELD_EVALUATION_COMMIT:-}" ]; then
  library=.field/evaluation-$(git rev-parse --short "$FIELD_EVALUATION_COMMIT").tar.gz
  [ -f "$library" ] || { mkdir -p .field && git archive --format=tar.gz -o "$library" "$FIELD_EVALUATION_COMMIT" evaluation; }
  echo "carry: $library"
fi
du -sh .whl .redis .field 2>/dev/null || true
