"""Where a preprocessed file's lines come from, by header family: what is left to cut in a compile.

    python benchmarks/preprocessed_composition.py FILE.ii [--top N]

FILE.ii: the output of ``-E`` (gcc or nvcc: both write ``# <line> "<file>"`` markers). Prints the
non-blank lines per family (libstdc++, CUDA's headers, torch's ATen/c10/torch, the source) and the
N files with the most.
"""

from __future__ import annotations

import argparse
import collections
import re

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
    return next((f for f in FAMILIES if f in path), "the source and others")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
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
