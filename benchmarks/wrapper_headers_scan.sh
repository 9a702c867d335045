#!/usr/bin/env bash
# Every field wrapper (load_inline's main.cpp, as `lean_headers_scan.py scan --work WORK` captured it:
# WORK/<source>/ext0/main.cpp) through gcc -fsyntax-only with the lean folder in CPATH
# (evaluation/builds/slim_headers.py): a line per source, "ok" or "FAIL <first error>", then the counts.
#   bash benchmarks/wrapper_headers_scan.sh WORK [JOBS]
set -uo pipefail
WORK=$1 JOBS=${2:-2}
PY=${PY:-python}
LEAN=$(KB_SLIM_CU_HEADERS=2 "$PY" -c "import sys; sys.path.insert(0, '.'); from evaluation.builds import slim_headers; print(slim_headers.ensure('$WORK/cache'))")
INC=$("$PY" -c "import sysconfig, torch.utils.cpp_extension as c; print(' '.join('-isystem ' + p for p in c.include_paths() + [sysconfig.get_paths()['include']]))")
one() {
  # shellcheck disable=SC2086
  r=$(CPATH=$LEAN c++ -fsyntax-only -DTORCH_EXTENSION_NAME=x -DTORCH_API_INCLUDE_EXTENSION_H $INC -fPIC -std=c++17 \
    "$1/ext0/main.cpp" 2>&1 | grep -m1 "error")
  if [ -z "$r" ]; then echo "$(basename "$1") ok"; else echo "$(basename "$1") FAIL $r"; fi
}
export -f one; export LEAN INC
out=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d ! -name cache -exec test -f {}/ext0/main.cpp \; -print | sort \
  | xargs -P "$JOBS" -I{} bash -c 'one {}')
echo "$out"
echo "wrappers: $(echo "$out" | grep -c .); compile lean: $(echo "$out" | grep -c ' ok$')"
