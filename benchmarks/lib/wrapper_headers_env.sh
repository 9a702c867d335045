# Sourced (from the repo root) by benchmarks/wrapper_headers_scan.sh and wrapper_headers_time.sh: what
# both give gcc for the wrapper (load_inline's main.cpp).
#   wrapper_headers_env CACHE   sets
#     LEAN           the lean folder (evaluation/builds/slim_headers.py at KB_SLIM_CU_HEADERS=2), written
#                    under CACHE ("" or "None" when it cannot be)
#     INC            torch's include folders and Python's, each as -isystem
#     WRAPPER_FLAGS  the defines, INC and language flags of the wrapper's compile (the caller adds
#                    -c / -fsyntax-only, the source and CPATH)
# PY: the Python with torch (default: python).
PY=${PY:-python}
wrapper_headers_env() {
  LEAN=$(KB_SLIM_CU_HEADERS=2 "$PY" -c "import sys; sys.path.insert(0, '.'); from evaluation.builds import slim_headers; print(slim_headers.ensure('$1'))")
  INC=$("$PY" -c "import sysconfig, torch.utils.cpp_extension as c; print(' '.join('-isystem ' + p for p in c.include_paths() + [sysconfig.get_paths()['include']]))")
  WRAPPER_FLAGS="-DTORCH_EXTENSION_NAME=x -DTORCH_API_INCLUDE_EXTENSION_H $INC -fPIC -std=c++17"
}
