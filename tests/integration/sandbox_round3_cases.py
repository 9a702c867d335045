"""Issue 28's evaluation-side cases for the replay (benchmarks/hardening_replay.py): 2 (a kernel
swapping its outputs for links), 3 (links and a FIFO planted in its build-cache entry), 4 (what the
cache keeps) and 8 (what a kernel reads of the worker's), each as real kernels through the real
sandbox on the CPU, in ``root`` mode (the worker's production mode: the replay runs as root).

No site is involved: the worker's library is what these cases attack. ``statuses`` holds each
evaluation's status; ``ok`` is the case's own check. The same kernels are tested one by one in
tests/adversarial/test_root_file_ops.py.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

from evaluation import EvaluationConfig, EvaluationResult, evaluate
from evaluation.builds.stage import build_dir_for
from evaluation.sandbox.isolation import detect_isolation
from tests.adversarial.round3_kernels import planter, snooper, swapper
from tests.integration.live_site import Outcome

ADD_ONE = (Path(__file__).resolve().parents[1] / "evaluation" / "problems" / "add_one.py").read_text()


def _run(source: str, cache: str, timeout: float = 240, **kw: Any) -> EvaluationResult | None:
    """One evaluation in a thread: None if it is still running after ``timeout`` (a blocked worker)."""
    opts: dict[str, Any] = {
        "correctness_trials": 1,
        "timing_trials": 0,
        "timeout_s": 120,
        "cpu_threads": 1,
        "build_cache_dir": cache,
        **kw,
    }
    out: list[EvaluationResult] = []
    worker = threading.Thread(
        target=lambda: out.append(evaluate(ADD_ONE, source, EvaluationConfig(**opts))), daemon=True
    )
    worker.start()
    worker.join(timeout)
    return out[0] if out else None


def _owner_mode(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def case_2_swap(work: Path) -> Outcome:
    victim = work / "victim.conf"
    victim.write_text("host data\n")
    before, statuses = _owner_mode(victim), []
    for seed in range(3):
        res = _run(swapper(str(victim)), str(work / "cache"), correctness_trials=8, seed=seed)
        statuses.append(res.status if res else "blocked")
    ok = _owner_mode(victim) == before
    return Outcome(
        "28.2 kernel swaps outputs for links",
        statuses,
        "host file keeps owner and mode",
        ok,
        note=f"victim {_owner_mode(victim)} (was {before})",
    )


def case_3_planted(work: Path) -> list[Outcome]:
    folder, secret, cache = work / "host-folder", work / "root-only", str(work / "cache")
    folder.mkdir()
    (folder / "lock").write_text("the host's\n")
    secret.write_text("0\t1000\t1\tTHE-HOST-SECRET\tab\n")
    os.chmod(secret, 0o600)
    link_src = planter("link", tag="replay", folder=str(folder))
    runs = [_run(link_src, cache), _run(link_src, cache)]
    link_ok = (folder / "lock").exists() and all(r and r.status == "correct" for r in runs)
    leak = _run(planter("ninja_log_link", tag="replay", secret=str(secret)), cache)
    leak_ok = bool(leak) and "THE-HOST-SECRET" not in repr(leak.environment) + leak.log  # type: ignore[union-attr]
    fifo = _run(planter("fifo", tag="replay"), cache, timeout=180)
    return [
        Outcome(
            "28.3 link lnk -> host folder",
            [r.status if r else "blocked" for r in runs],
            "host <folder>/lock kept",
            link_ok,
        ),
        Outcome(
            "28.3 link rd/.ninja_log -> root file",
            [leak.status if leak else "blocked"],
            "not in build_steps_s",
            leak_ok,
        ),
        Outcome(
            "28.3 FIFO ff/.ninja_log",
            [fifo.status if fifo else "blocked"],
            "worker not blocked",
            bool(fifo) and fifo.status == "correct",
        ),  # type: ignore[union-attr]
    ]


def case_4_leftovers(work: Path) -> list[Outcome]:
    cache = str(work / "cache")
    source = planter("leftovers", tag="replay")
    res = _run(source, cache)
    entry = build_dir_for(source, EvaluationConfig(build_cache_dir=cache))
    ext = Path(entry.path or "") / "torch_extensions"
    kept_ok = (
        entry.built
        and not (ext / "kernel_phase.bin").exists()
        and stat.S_IMODE(os.stat(ext / "open").st_mode) == 0o755
        and os.stat(ext / "open").st_uid == 0
    )
    big_src = planter("big", tag="replay")
    big = _run(big_src, cache, build_entry_max_mb=1)
    big_ok = bool(big) and not build_dir_for(big_src, EvaluationConfig(build_cache_dir=cache)).built
    return [
        Outcome(
            "28.4 kernel-phase file, 0777 folder",
            [res.status if res else "blocked"],
            "file gone, folder root's 0755",
            bool(kept_ok),
        ),
        Outcome("28.4 build over the entry budget", [big.status if big else "blocked"], "not published", big_ok),
    ]


def case_8_snoop(work: Path) -> Outcome:
    res = _run(snooper("replay"), str(work / "cache"))
    log = res.log if res else ""
    ok = "SNOOP ref-log: denied" in log and "SNOOP cache-list: denied" in log
    return Outcome(
        "28.8 kernel reads ref log, lists cache",
        [res.status if res else "blocked"],
        "both denied",
        ok,
        note=" ".join(line for line in log.splitlines() if "SNOOP" in line),
    )


def replay_sandbox_round3() -> list[Outcome]:
    """Issue 28 cases 2, 3, 4 and 8 (evaluation side); each needs the sandbox's ``root`` mode."""
    if detect_isolation()["mode"] != "root":
        return [Outcome("28.2-4,8 sandbox cases", [], "root sandbox mode", False, note="needs root and unshare")]
    work = Path(tempfile.mkdtemp(prefix="kb-round3-"))
    os.chmod(work, 0o755)
    return [case_2_swap(work), *case_3_planted(work), *case_4_leftovers(work), case_8_snoop(work)]
