"""Where a preprocessed file's lines come from, by header family: what is left to cut in a compile.

    python benchmarks/preprocessed_composition.py FILE.ii [--top N]
    python benchmarks/preprocessed_composition.py FILE.ii --build DIR --source cu|main [--headers lean|full]

FILE.ii: the output of ``-E`` (gcc or nvcc: both write ``# <line> "<file>"`` markers). Prints the
non-blank lines per family (libstdc++, CUDA's headers, torch's ATen/c10/torch, the source) and the
N files with the most.

``--build DIR``: first write FILE.ii: DIR is a ``load_inline`` build folder as
``lean_headers_scan.py scan --work WORK`` captured it (``WORK/<source>/ext0``: torch's ``build.ninja``,
``cuda.cu``, ``main.cpp``); the compile of ``--source`` (the ``.cu`` or the wrapper) is read from
``ninja -t commands``, the ``.cu``'s ``-gencode`` flags replaced by ``-arch=sm_90`` (as the scan does;
nvcc preprocesses for one architecture only), ``-c`` by ``-E`` and the object by FILE.ii, and it is run in
DIR with ``CPATH`` the lean folder (``--headers lean``, slim_headers at ``KB_SLIM_CU_HEADERS=2``, written
under ``DIR/lean_cache``) or without one (``full``: torch's own headers). The command is printed first,
exactly as run.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys

#: Families, tried in order on a header's path (the first that matches names it).
FAMILIES = ("ATen/ops/", "ATen/core/TensorBody", "ATen/", "c10/", "torch/", "/cuda", "/usr/include/c++", "/usr/")
_MARKER = re.compile(r'# \d+ "([^"]+)"')


def lines_by_file(path: str) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    current = ""
    with open(path, errors="replace") as fh:
        for line in fh:
            marker = _MARKER.match(line)
            if marker:
                current = marker.group(1)
            elif line.strip():
                counts[current] += 1
    return counts


def family(path: str) -> str:
    if path.endswith((".cu", ".cpp")):  # the source itself (``.../cuda.cu`` is no CUDA header)
        return "the source and others"
    return next((f for f in FAMILIES if f in path), "the source and others")


def preprocess_command(build: str, source: str, output: str) -> list[str]:
    """torch's compile of ``source`` ("cu" or "main") in the build folder ``build``, as ``-E`` into ``output``."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from benchmarks.gpu.nvcc_cuts import ninja_commands  # deferred: --build only
    from benchmarks.lean_headers_scan import with_arch

    ninja = shutil.which("ninja") or os.path.join(os.path.dirname(sys.executable), "ninja")
    listed = subprocess.run([ninja, "-C", build, "-t", "commands"], capture_output=True, text=True, check=True)
    found = ninja_commands(listed.stdout)
    argv = with_arch(found.cu, "sm_90") if source == "cu" else list(found.main)
    if not argv:
        raise SystemExit(f"{build}: ninja lists no compile of the {source} source")
    argv[argv.index("-c")] = "-E"
    argv[argv.index("-o") + 1] = output
    return argv


def lean_folder(cache_root: str) -> str:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    os.environ["KB_SLIM_CU_HEADERS"] = "2"
    from evaluation.builds import slim_headers  # deferred: --build only

    folder = slim_headers.ensure(cache_root)
    if folder is None:
        raise SystemExit(f"slim_headers could not write the lean folder under {cache_root}")
    return folder


def run_preprocess(args: argparse.Namespace) -> None:
    """Write ``args.file`` with torch's compile as ``-E`` (module doc), the command printed first."""
    build = os.path.abspath(args.build)
    output = os.path.abspath(args.file)
    argv = preprocess_command(build, args.source, output)
    cpath = lean_folder(os.path.join(build, "lean_cache")) if args.headers == "lean" else ""
    env = {k: v for k, v in os.environ.items() if k != "CPATH"}
    if cpath:
        env["CPATH"] = cpath
    print(f"# cd {shlex.quote(build)} && CPATH={shlex.quote(cpath)} {shlex.join(argv)}", flush=True)
    subprocess.run(argv, cwd=build, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--build", default="", help="a captured load_inline build folder: write FILE by -E first")
    parser.add_argument("--source", choices=("cu", "main"), default="cu", help="--build: the .cu or the wrapper")
    parser.add_argument("--headers", choices=("lean", "full"), default="lean", help="--build: the lean folder or none")
    args = parser.parse_args(argv)
    if args.build:
        run_preprocess(args)
    counts = lines_by_file(args.file)
    total = sum(counts.values())
    families: collections.Counter[str] = collections.Counter()
    for path, n in counts.items():
        families[family(path)] += n
    print(f"{total} non-blank lines")
    for name, n in families.most_common():
        print(f"{n:8d} {100 * n / total:5.1f} %  {name}")
    print()
    for path, n in counts.most_common(args.top):
        print(f"{n:8d}  {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
