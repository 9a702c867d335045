#!/usr/bin/env bash
# Every field wrapper (load_inline's main.cpp, as `lean_headers_scan.py scan --work WORK` captured it:
# WORK/<source>/ext0/main.cpp) through gcc -fsyntax-only with the lean folder in CPATH
# (evaluation/builds/slim_headers.py): a line per source, "ok" or "FAIL <first error>", then the counts.
#   bash benchmarks/wrapper_headers_scan.sh WORK [JOBS]
set -uo pipefail
WORK=$1 JOBS=${2:-2}
# shellcheck source=benchmarks/lib/wrapper_headers_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/wrapper_headers_env.sh"
wrapper_headers_env "$WORK/cache"
one() {
  # shellcheck disable=SC2086
  r=$(CPATH=$LEAN c++ -fsyntax-only $WRAPPER_FLAGS \
    "$1/ext0/main.cpp" 2>&1 | grep -m1 "error")
  if [ -z "$r" ]; then echo "$(basename "$1") ok"; else echo "$(basename "$1") FAIL $r"; fi
}
export -f one; export LEAN INC WRAPPER_FLAGS
out=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d ! -name cache -exec test -f {}/ext0/main.cpp \; -print | sort \
  | xargs -P "$JOBS" -I{} bash -c 'one {}')
echo "$out"
echo "wrappers: $(echo "$out" | grep -c .); compile lean: $(echo "$out" | grep -c ' ok$')"
