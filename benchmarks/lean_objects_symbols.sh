#!/usr/bin/env bash
# Do lean .cu objects link as torch's own headers' would? A function the lean headers declare but do
# not define (its inline body in a header they leave out) compiles, then fails when the kernel's
# module is loaded. So: compile a sample of field .cu files lean (nvcc -c, no GPU needed) and list
# each object's undefined symbols that neither torch's libraries, the C/C++ runtime nor CUDA
# (cuda*, c10::cuda, at::cuda: not in a CPU torch) define. Expected: none but atexit (libc_nonshared).
#
#   bash benchmarks/lean_objects_symbols.sh WORK LEAN_FOLDER [N]
# WORK: a `lean_headers_scan.py scan --work WORK` folder (one <source>/ext0/cuda.cu each);
# LEAN_FOLDER: the lean folder it used (WORK/cache/.pch/lean-cu-<digest>/include); N: sources (20).
set -uo pipefail
WORK=$1 CP=$2 N=${3:-20}
PY=${PY:-python}
T=$("$PY" -c "import torch.utils.cpp_extension as c; print(c.include_paths()[0])")
LIB=$(dirname "$T")/lib
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
PYINC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
KNOWN=$(mktemp)
{ for f in "$LIB"/*.so*; do nm -D --defined-only "$f" 2>/dev/null | awk '{print $3}'; done
  for f in libstdc++.so.6 libc.so.6 libm.so.6 libgcc_s.so.1; do
    nm -D --defined-only "$(c++ -print-file-name="$f")" | awk '{print $3}' | sed 's/@.*//'; done; } | sort -u > "$KNOWN"
n=0 bad=0
for d in $(ls "$WORK" | grep -v '^cache$' | shuf -n "$N" --random-source=<(yes)); do
  cu="$WORK/$d/ext0/cuda.cu"; [ -f "$cu" ] || continue
  o=$(mktemp --suffix=.o)
  if ! CPATH=$CP "$NVCC" -DTORCH_EXTENSION_NAME=x -DTORCH_API_INCLUDE_EXTENSION_H -isystem "$T" \
      -isystem "$T/torch/csrc/api/include" -isystem "$PYINC" -D__CUDA_NO_HALF_OPERATORS__ \
      -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ \
      --expt-relaxed-constexpr -arch=sm_90 --compiler-options -fPIC -std=c++20 -c "$cu" -o "$o" > /dev/null 2>&1; then
    echo "$d: does not compile lean (the scan says why)"; rm -f "$o"; continue
  fi
  n=$((n + 1))
  left=$(nm -u "$o" | awk '{print $2}' | sort -u | comm -23 - "$KNOWN" \
    | grep -v -E '^(cuda|__cuda|_Z.*c104cuda|_Z.*2at4cuda|__gxx_personality|_GLOBAL_OFFSET|__dso_handle|_Unwind|atexit$)')
  if [ -n "$left" ]; then bad=$((bad + 1)); echo "$d: unresolved:"; echo "$left" | c++filt | head -8; else echo "$d: ok"; fi
  rm -f "$o"
done
rm -f "$KNOWN"
echo "objects: $n; with a symbol nobody defines: $bad"
