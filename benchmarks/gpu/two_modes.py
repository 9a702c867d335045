"""The two modes of a timed call (docs/field.md, "What is left", step 5): a problem's reference timed
against itself, with every timed call's time kept, once per variant of the timing, so that what makes
some rounds read slower than the device-time call can be told apart.

    python3 benchmarks/gpu/two_modes.py .field/KernelBench/level1/19_ReLU.py \\
        --variants default no_placement --repeat 2 --out $OUT/two_modes.jsonl

The 4 GB elementwise problems of level 1 (19 ReLU, 20 LeakyReLU, 22 Tanh) read 1.03-1.05 against
themselves under KernelBench's rule at four calls a round, their device-time figure 1.000: some of
their timed calls take longer than others in the same process. A variant switches one of the
timing's own steps off (``EvaluationConfig.disable_defences``; the CLI has no switch for it):

- ``default``: as the site and the sweep time;
- ``no_placement``: the round's new placement of the inputs and outputs (``placement``) left out.

Each line of the output is one evaluation: the variant, its speedup and interval, the device-time
speedup, and each round's per-call milliseconds for each process, every call kept (on a GPU the
round's last call is its check call, which the round's figure leaves out). The summary printed at the
end gives, per variant and process, the figured calls' median and the share of them more than 10 %
above the fastest call of the same process.

No Django: the library alone, as `python -m evaluation sweep` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file from the checkout

from evaluation import EvaluationConfig, evaluate  # noqa: E402  (after the path)
from evaluation.phases import timing  # noqa: E402
from evaluation.sweep import self_kernel  # noqa: E402

#: Each variant's timing steps switched off.
VARIANTS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "no_placement": frozenset({"placement"}),
}
SLOW = 1.10  # a call this much above its process's fastest counts as the slow mode


class CallTimes:
    """Every timed request's per-call times, by process role, kept while installed (it wraps the
    timing phase's one call of a timing request)."""

    def __init__(self) -> None:
        self.rounds: list[dict[str, list[float]]] = []
        self._watched = timing._watched_call

    def __enter__(self) -> CallTimes:
        def watched(pair: Any, process: Any, msg: Any, rounds: Any) -> Any:
            reply, wall = self._watched(pair, process, msg, rounds)
            if not self.rounds or process.role in self.rounds[-1]:
                self.rounds.append({})
            self.rounds[-1][process.role] = [ns / 1e6 for ns in reply.times_ns]
            return reply, wall

        timing._watched_call = watched
        return self

    def __exit__(self, *exc: object) -> None:
        timing._watched_call = self._watched


def measure(problem: str, variant: str, device: str) -> dict[str, Any]:
    """One evaluation of the problem against itself under `variant`, with its calls' times."""
    source = Path(problem).read_text()
    config = EvaluationConfig(device=device, disable_defences=VARIANTS[variant], instruments=frozenset())
    with CallTimes() as calls:
        result = evaluate(source, self_kernel(source), config)
    device_figures = result.device or {}
    return {
        "problem": Path(problem).stem,
        "variant": variant,
        "device": device,
        "status": result.status,
        "speedup": result.speedup,
        "speedup_interval": result.speedup_interval,
        "device_speedup": device_figures.get("speedup"),
        "rounds": calls.rounds,
        "error": result.error,
    }


def summary(lines: list[dict[str, Any]]) -> list[str]:
    """Per variant and process: the timed calls' median ms and the share in the slow mode, each call
    against the fastest of its own evaluation's process (two evaluations are two processes), the
    rounds' check calls left out as the round's figure leaves them (they wait for the flush)."""
    out = []
    for variant in dict.fromkeys(line["variant"] for line in lines):
        mine = [line for line in lines if line["variant"] == variant]
        speedups = ", ".join(f"{line['speedup']:.3f}" for line in mine if line["speedup"] is not None)
        out.append(f"{variant}: speedup {speedups or 'none'}")
        roles = dict.fromkeys(role for line in mine for r in line["rounds"] for role in r)
        for role in roles:
            times, slow = [], 0
            for line in mine:
                own = [t for r in line["rounds"] for t in figured(r.get(role, []), line["device"])]
                if own:
                    times += own
                    slow += sum(t > SLOW * min(own) for t in own)
            if times:
                out.append(
                    f"  {role}: {len(times)} calls, median {statistics.median(times):.4f} ms, "
                    f"above {SLOW:.2f}x its process's fastest: {slow / len(times):.0%}"
                )
    return out


def figured(calls: list[float], device: str) -> list[float]:
    """The calls a round's figure is made of (timing.figured_calls: on a GPU all but the check call)."""
    return calls[: timing.figured_calls(len(calls), device)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="two_modes", description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", help="a KernelBench problem file")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--repeat", type=int, default=2, help="evaluations per variant, interleaved")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", help="JSON lines, one an evaluation (default: standard output)")
    args = parser.parse_args(argv)
    lines = []
    with open(args.out, "w") if args.out else contextlib.nullcontext(sys.stdout) as sink:
        for _ in range(args.repeat):
            for variant in args.variants:
                line = measure(args.problem, variant, args.device)
                lines.append(line)
                print(json.dumps(line), file=sink, flush=True)
    print("\n".join(summary(lines)), file=sys.stderr)
    return 0 if all(line["status"] == "correct" for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
