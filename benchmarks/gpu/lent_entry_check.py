"""Issue 28 on a GPU: a CUDA load_inline kernel evaluated twice in a fresh build cache (the first
builds in the build stage and publishes; the second is lent the published entry read-only and must
load it without rebuilding), then the entry's files: all root's, nothing world-writable, nothing the
kernel phase left. Writes $OUT/lent_entry.json (or prints it).

    python benchmarks/gpu/lent_entry_check.py
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from evaluation import EvaluationConfig, evaluate  # noqa: E402
from evaluation.builds.stage import build_dir_for  # noqa: E402

PROBLEM = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "evaluation", "problems", "add_one.py"
)

KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = """
#include <torch/extension.h>
__global__ void add_one_k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    add_one_k<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="kb_lent_add_one", cpp_sources="torch::Tensor add_one(torch::Tensor x);",
                  cuda_sources=CUDA, functions=["add_one"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.add_one(x)
'''


def main() -> None:
    cache = tempfile.mkdtemp(prefix="kb-lent-")
    cfg = EvaluationConfig(device="cuda", build_cache_dir=cache, timeout_s=600, correctness_trials=2, timing_trials=5)
    with open(PROBLEM, encoding="utf-8") as fh:
        problem = fh.read()
    runs = []
    for _ in range(2):
        res = evaluate(problem, KERNEL, cfg)
        runs.append(
            {
                "status": res.status,
                "error": res.error,
                "build_cached": res.build_cached,
                "timings_s": res.timings_s,
                "isolation": res.environment.get("isolation_mode"),
                "log_tail": res.log[-1500:],
            }
        )
    entry = build_dir_for(KERNEL, cfg)
    tree = {}
    for dirpath, dirnames, filenames in os.walk(entry.path or ""):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            tree[os.path.relpath(os.path.join(dirpath, name), entry.path)] = [st.st_uid, oct(stat.S_IMODE(st.st_mode))]
    bad = {k: v for k, v in tree.items() if v[0] != 0 or int(v[1], 8) & 0o022}
    out = {
        "runs": runs,
        "entry_mode": oct(stat.S_IMODE(os.stat(entry.path or "").st_mode)),
        "not_root_or_writable": bad,
        "entry_files": len(tree),
        "ok": runs[0]["status"] == runs[1]["status"] == "correct" and runs[1]["build_cached"] and not bad,
    }
    text = json.dumps(out, indent=1)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "lent_entry.json"), "w", encoding="utf-8") as fh:
            fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
