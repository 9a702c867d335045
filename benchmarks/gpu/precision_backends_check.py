"""On a GPU host: KernelBench's precision option and backends through the scoring library.

    python3 benchmarks/gpu/precision_backends_check.py      (prints one line per case, then JSON)

Cases: the small matmul's reference as its own kernel under fp32, fp16 and bf16 (correct, with the
tolerance the outputs' dtype gives); a kernel that insists on bfloat16 inputs under bf16 (correct)
and fp32 (runtime error); and one kernel per KernelBench backend (cuda, triton, tilelang, cute,
thunderkittens, hip): each runs where the host has its library, else fails at once naming it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from evaluation import EvaluationConfig, evaluate  # noqa: E402
from evaluation.results.kernelbench_format import to_kernelbench  # noqa: E402
from tests.evaluation.test_backends import KERNELBENCH_EXAMPLES  # noqa: E402

MATMUL = (ROOT / "tests/evaluation/problems/matmul_small.py").read_text()
SELF = MATMUL.replace("class Model(", "class ModelNew(")
BF16_ONLY = SELF.replace(
    "    def forward(self, a, b):\n",
    "    def forward(self, a, b):\n        if a.dtype != torch.bfloat16:\n            raise RuntimeError(f'got {a.dtype}')\n",
)


def case(name: str, kernel: str, precision: str = "fp32") -> dict:
    start = time.monotonic()
    config = EvaluationConfig(device="cuda", precision=precision, correctness_trials=3, timing_trials=5, timeout_s=300)
    result = evaluate(MATMUL, kernel, config).to_dict()
    line = f"{name:<28} {precision:<5} {result['status']:<14} {time.monotonic() - start:6.1f} s  {(result['error'] or '')[:110]}"
    print(line, flush=True)
    return {"case": name, "precision": precision, "kernelbench": to_kernelbench(result)}


def main() -> None:
    out = [case("self kernel", SELF, p) for p in ("fp32", "fp16", "bf16")]
    out += [case("bf16-only kernel", BF16_ONLY, p) for p in ("bf16", "fp32")]
    for backend, source in KERNELBENCH_EXAMPLES.items():
        out.append(case(f"{backend} backend marker", SELF.replace("import torch\n", "import torch\n" + source, 1)))
    print(json.dumps(out, default=str)[:20000])


if __name__ == "__main__":
    main()
