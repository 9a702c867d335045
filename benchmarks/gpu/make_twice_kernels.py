#!/usr/bin/env python3
"""Write honest "twice the work" kernels for KernelBench problems: the problem's Model (renamed)
with a forward that computes everything twice and returns the second result (expected ~0.5x).

    python3 benchmarks/gpu/make_twice_kernels.py KB_DIR OUT_DIR level1/1_Square_matrix_multiplication_ ...
"""

import os
import re
import sys

TAIL = """

class ModelNew(_KbReference):
    def forward(self, *args):
        super().forward(*args)
        return super().forward(*args)
"""


def main() -> None:
    kb, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    base = os.path.join(kb, "KernelBench") if os.path.isdir(os.path.join(kb, "KernelBench")) else kb
    for name in names:
        level, problem = name.split("/")
        src = open(os.path.join(base, level, problem + ".py"), encoding="utf-8").read()
        os.makedirs(os.path.join(out, level), exist_ok=True)
        with open(os.path.join(out, level, problem + ".py"), "w", encoding="utf-8") as fh:
            fh.write(re.sub(r"\bModel\b", "_KbReference", src) + TAIL)


if __name__ == "__main__":
    main()
