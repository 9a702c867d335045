"""Replays the sandbox cases of issues 19 (case 7) and 20 (case 6) against the scoring library and
prints what each kernel got: files left in /tmp, /var/tmp and /dev/shm, the checkout's settings and
the host's /etc/passwd read by a kernel, 256 forks sharing memory, a fork bomb, a file past the size
limit (64 MB here).

    .venv/bin/python benchmarks/sandbox_replay.py [--memory-limit-mb 4096]

No database, no Redis: evaluation.evaluate on the CPU, as a worker calls it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluation import EvaluationConfig, evaluate  # noqa: E402

PROBLEM = (REPO / "tests/evaluation/problems/add_one.py").read_text()
HEAD = "import os, time\nimport torch, torch.nn as nn\n"
MODEL = "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n        return x + 1.0\n"


def kernel(module: str = "", body: str = "        pass") -> str:
    return HEAD + module + MODEL.format(body=body)


def cases(token: str) -> dict[str, str]:
    settings = REPO / "config" / "settings.py"
    leave = "".join(f"open('{d}/kb-replay-{token}', 'w').write('x')\n" for d in ("/tmp", "/var/tmp", "/dev/shm"))
    read = (
        "found = []\n"
        f"for path in ({str(settings)!r}, '/etc/passwd'):\n"
        "    try:\n        found.append(path + ': ' + open(path).read(30).replace(chr(10), ' '))\n"
        "    except OSError as exc:\n        found.append(path + ': ' + type(exc).__name__)\n"
        "raise RuntimeError(' | '.join(found))\n"
    )
    forks = (
        "        kids = []\n        for _ in range(256):\n            pid = os.fork()\n"
        "            if pid == 0:\n                time.sleep(1.5)\n                os._exit(0)\n"
        "            kids.append(pid)\n        for pid in kids:\n            os.waitpid(pid, 0)"
    )
    bomb = (
        "        for _ in range(12):\n            try:\n                os.fork()\n            except OSError:\n"
        "                break\n        time.sleep(30)"
    )
    big = "        open('big.bin', 'wb').write(b'x' * (128 * 2**20))"
    return {
        "19.7 files left in /tmp, /var/tmp, /dev/shm": kernel(leave),
        "19.7 checkout settings and /etc/passwd": kernel(read),
        "20.6 256 forks sharing memory": kernel(body=forks),
        "20.6 fork bomb (at most 4096)": kernel(body=bomb),
        "20.6 a 128 MB file (limit 64 MB)": kernel(body=big),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory-limit-mb", type=int, default=4096)
    args = parser.parse_args()
    token = secrets.token_hex(6)
    cfg = dict(
        correctness_trials=1,
        timing_trials=0,
        cpu_threads=1,
        timeout_s=120,
        memory_limit_mb=args.memory_limit_mb,
        file_size_limit_mb=64,
    )
    for name, source in cases(token).items():
        t0 = time.monotonic()
        res = evaluate(PROBLEM, source, EvaluationConfig(**cfg))
        env = res.environment
        print(f"## {name}: {res.status} in {time.monotonic() - t0:.1f} s")
        print(f"   error: {res.error}")
        print(
            f"   isolation {env.get('isolation_mode')}, private_tmp {env.get('private_tmp')}, process_limit "
            f"{env.get('process_limit')}, peak resident sum {env.get('kernel_peak_rss_mb')} MB, "
            f"peak tasks {env.get('kernel_peak_tasks')}"
        )
    left = [p for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.exists(p := f"{d}/kb-replay-{token}")]
    print(f"files left behind on the host: {left or 'none'}")
    for path in left:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
