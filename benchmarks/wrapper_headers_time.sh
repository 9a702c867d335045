#!/usr/bin/env bash
# The wrapper's compile (load_inline's main.cpp) with torch's whole header and with the lean folder's
# (evaluation/builds/slim_headers.py, LEAN_HOST_INCLUDES), neither precompiled: gcc -c, R times each,
# alternately, with the flags torch's ninja file gives it (less the architecture: a C++ compile).
#   bash benchmarks/wrapper_headers_time.sh [MAIN_CPP] [R]     (default: a field-shaped wrapper, 2)
set -euo pipefail
PY=${PY:-python}
R=${2:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ -n "${1:-}" ]; then cp "$1" "$WORK/main.cpp"; else
  printf '#include <torch/extension.h>\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x, int k, float a);\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def("f", torch::wrap_pybind_function(f), "f");\n}\n' > "$WORK/main.cpp"
fi
LEAN=$(KB_SLIM_CU_HEADERS=2 "$PY" -c "import sys; sys.path.insert(0, '.'); from evaluation.builds import slim_headers; print(slim_headers.ensure('$WORK/cache'))")
INC=$("$PY" -c "import sysconfig, torch.utils.cpp_extension as c; print(' '.join('-isystem ' + p for p in c.include_paths() + [sysconfig.get_paths()['include']]))")
echo "host: $(nproc) cores, $(c++ --version | head -1), torch $("$PY" -c 'import torch; print(torch.__version__)')"
for i in $(seq "$R"); do
  for mode in full lean; do
    cp=""; [ "$mode" = lean ] && cp=$LEAN
    # shellcheck disable=SC2086
    s=$( { CPATH=$cp /usr/bin/time -f "%e %M" c++ -MMD -MF "$WORK/m.d" -DTORCH_EXTENSION_NAME=x \
      -DTORCH_API_INCLUDE_EXTENSION_H $INC -fPIC -std=c++17 -c "$WORK/main.cpp" -o "$WORK/$mode.o"; } 2>&1 | tail -1)
    echo "run $i $mode: ${s% *} s wall, ${s#* } KB peak"
  done
done
echo "defined symbols (full / lean): $(nm --defined-only "$WORK/full.o" | wc -l) / $(nm --defined-only "$WORK/lean.o" | wc -l)"
echo "undefined symbols (full / lean): $(nm -u "$WORK/full.o" | wc -l) / $(nm -u "$WORK/lean.o" | wc -l)"
