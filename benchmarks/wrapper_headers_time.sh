#!/usr/bin/env bash
# The wrapper's compile (load_inline's main.cpp) with torch's whole header and with the lean folder's
# (evaluation/builds/slim_headers.py, LEAN_HOST_INCLUDES), neither precompiled: gcc -c, R times each,
# alternately, with torch's include folders and defines and -fPIC -std=c++17 (lib/wrapper_headers_env.sh;
# torch 2.13's ninja file says -std=c++20, which the --pch modes take from it).
#   bash benchmarks/wrapper_headers_time.sh [MODE] [--ftime-report] [MAIN_CPP] [R]
#                                             (default: a field-shaped wrapper, 2)
# MODE, one of:
#   (none)       as above: full and lean alternately, neither precompiled
#   --pch        torch's torch/extension.h precompiled as evaluation/builds/pch.py makes it: torch's own
#                ninja flags (pch.torch_cxx_command("cpu", []): -std=c++20, no -O), `-x c++-header`, into
#                <dir>/torch/extension.h.gch/default.gch with pch.STAND_IN as <dir>/torch/extension.h; the
#                header build timed once, then MAIN_CPP compiled R times with CPATH=<dir>, the same flags,
#                -DTORCH_EXTENSION_NAME=x -Winvalid-pch -H (each run says whether gcc used the .gch)
#   --pch-lean   the same with the lean folder's torch/extension.h precompiled (CPATH=<dir>:<lean folder>)
#   --empty      --pch, the source a file that only includes torch/extension.h (MAIN_CPP ignored)
# --ftime-report, with any mode: gcc's -ftime-report on each timed compile; its phase lines, template
# instantiation and TOTAL, and template instantiation's share of TOTAL's wall seconds.
set -euo pipefail
MODE=plain FTIME=""
while [ $# -gt 0 ]; do
  case $1 in
    --pch) MODE=pch ;;
    --pch-lean) MODE=pch-lean ;;
    --empty) MODE=empty ;;
    --ftime-report) FTIME=-ftime-report ;;
    *) break ;;
  esac
  shift
done
R=${2:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ "$MODE" = empty ]; then printf '#include <torch/extension.h>\n' > "$WORK/main.cpp"
elif [ -n "${1:-}" ]; then cp "$1" "$WORK/main.cpp"; else
  printf '#include <torch/extension.h>\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x, int k, float a);\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def("f", torch::wrap_pybind_function(f), "f");\n}\n' > "$WORK/main.cpp"
fi
# shellcheck source=benchmarks/lib/wrapper_headers_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/wrapper_headers_env.sh"
wrapper_headers_env "$WORK/cache"
echo "host: $(nproc) cores, $(c++ --version | head -1), torch $("$PY" -c 'import torch; print(torch.__version__)')"

# gcc's -ftime-report (in the file $1): the phases, template instantiation, TOTAL, and the share.
ftime_summary() {
  grep -E '^ (phase [^:]*|template instantiation|TOTAL) +:' "$1" | sed 's/^/  /'
  awk -F: '/^ template instantiation +:/ { s = $2; gsub(/\([^)]*\)/, "", s); split(s, a, " "); inst = a[3] }
           /^ TOTAL +:/ { s = $2; split(s, a, " "); total = a[3] }
           END { if (total > 0) printf "  template instantiation: %.2f of %.2f s wall, %.0f %%\n", inst, total, 100 * inst / total }' "$1"
}

if [ "$MODE" = plain ]; then
  for i in $(seq "$R"); do
    for mode in full lean; do
      cp=""; [ "$mode" = lean ] && cp=$LEAN
      # shellcheck disable=SC2086
      s=$( { CPATH=$cp /usr/bin/time -f "%e %M" c++ -MMD -MF "$WORK/m.d" $FTIME $WRAPPER_FLAGS \
        -c "$WORK/main.cpp" -o "$WORK/$mode.o"; } 2>&1 | tee "$WORK/err" | tail -1)
      echo "run $i $mode: ${s% *} s wall, ${s#* } KB peak"
      [ -z "$FTIME" ] || ftime_summary "$WORK/err"
    done
  done
  echo "defined symbols (full / lean): $(nm --defined-only "$WORK/full.o" | wc -l) / $(nm --defined-only "$WORK/lean.o" | wc -l)"
  echo "undefined symbols (full / lean): $(nm -u "$WORK/full.o" | wc -l) / $(nm -u "$WORK/lean.o" | wc -l)"
  exit 0
fi

# The precompiled header, as evaluation/builds/pch.py's compile_headers builds it.
PCH=$WORK/pch/include
mkdir -p "$PCH/torch/extension.h.gch"
read -r CXX < <("$PY" -c "import sys; sys.path.insert(0, '.'); from evaluation.builds import pch; print(pch.torch_cxx_command('cpu', [])[0])")
read -r -a FLAGS < <("$PY" -c "import sys, shlex; sys.path.insert(0, '.'); from evaluation.builds import pch; print(shlex.join(pch.torch_cxx_command('cpu', [])[1]))")
"$PY" -c "import sys; sys.path.insert(0, '.'); from evaluation.builds import pch; sys.stdout.write(pch.STAND_IN)" > "$PCH/torch/extension.h"
if [ "$MODE" = pch-lean ]; then
  HEADER=$LEAN/torch/extension.h HCPATH=$LEAN UCPATH=$PCH:$LEAN
else
  HEADER=$("$PY" -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'include', 'torch', 'extension.h'))")
  HCPATH="" UCPATH=$PCH
fi
GCH=$PCH/torch/extension.h.gch/default.gch
echo "compiler: $CXX ${FLAGS[*]}"
echo "header: $HEADER (CPATH=$HCPATH)"
# shellcheck disable=SC2086
s=$( { CPATH=$HCPATH /usr/bin/time -f "%e %M" $CXX "${FLAGS[@]}" -x c++-header "$HEADER" -o "$GCH"; } 2>&1 | tee "$WORK/err" | tail -1)
echo "precompiled header: ${s% *} s wall, ${s#* } KB peak, $(stat -c %s "$GCH") bytes"
for i in $(seq "$R"); do
  # shellcheck disable=SC2086
  s=$( { CPATH=$UCPATH /usr/bin/time -f "%e %M" $CXX -MMD -MF "$WORK/m.d" "${FLAGS[@]}" -DTORCH_EXTENSION_NAME=x \
    -Winvalid-pch -H $FTIME -c "$WORK/main.cpp" -o "$WORK/main.o"; } 2>&1 | tee "$WORK/err" | tail -1)
  used=no; grep -qxF "! $GCH" "$WORK/err" && used=yes
  echo "run $i $MODE main.o: ${s% *} s wall, ${s#* } KB peak, .gch used: $used"
  [ -z "$FTIME" ] || ftime_summary "$WORK/err"
done
echo "defined / undefined symbols: $(nm --defined-only "$WORK/main.o" | wc -l) / $(nm -u "$WORK/main.o" | wc -l)"
