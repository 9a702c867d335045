"""Issue 39's findings 2, 3, 4, 5 and 8 for the replay (benchmarks/hardening_replay.py): what a kernel's
build can make the unit server hold (connections, threads, request bytes) and that it is counted as
the build's own memory, compiles past a build's share, the server's own checks, waits on a unit's
lock, ``.units`` in the cache's budget, and a kernel's temporary folders and its work folder (HOME). Through the library on the CPU, as root (the worker's mode); the same
cases one by one: tests/evaluation/test_unit_cache.py and test_limits.py.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import struct
import tempfile
import threading
import time

from evaluation.builds import units
from evaluation.builds.cache_evict import evict
from evaluation.builds.stage import prebuild
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import EVAL_PROBLEMS, run
from tests.evaluation.test_limits import FILL_HOME, FILL_TMP
from tests.evaluation.test_unit_cache import fills_then_compiles
from tests.integration.live_site import Outcome


def _server(cache: str, memory_limit_mb: int = 4096) -> tuple[Sandbox, units.UnitServer]:
    sandbox = Sandbox(device="cpu", size_scale=1, memory_limit_mb=memory_limit_mb)
    srv = units.serve(
        cache,
        sandbox.root,
        {},
        "cpu",
        time.monotonic() + 600,
        {"size_scale": 1, "memory_limit_mb": memory_limit_mb},
        None,
    )
    assert srv is not None
    return sandbox, srv


def case_2_connections(srv: units.UnitServer) -> Outcome:
    socks = []
    for _ in range(60):  # each announces the largest request, then sends nothing
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(srv.path)
        sock.sendall(struct.pack(">I", units.MAX_REQUEST_BYTES))
        socks.append(sock)
    time.sleep(1.0)
    held = sum(1 for t in threading.enumerate() if t.name == "kb-unit-request")
    for sock in socks:
        sock.close()
    return Outcome(
        "39.2 60 connections announcing 2 MiB",
        [held, srv.stats["refused"]],
        f"<= {units.MAX_CONNECTIONS_PER_BUILD} request threads",
        held <= units.MAX_CONNECTIONS_PER_BUILD,
        note=f"threads {held}, refused {srv.stats['refused']}",
    )


def case_3_compiles(srv: units.UnitServer) -> list[Outcome]:
    answers: list[object] = []
    threads = [
        threading.Thread(
            target=lambda i=i: answers.append(
                srv.answer({"name": "main.cpp", "flags": ["-O0"], "text": f"int kb_r{i}() {{ return {i}; }}\n"})
            )
        )
        for i in range(10)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    incbin = srv.answer({"name": "main.cpp", "flags": [], "text": 'asm(".inc" "bin \\"/etc/hostname\\"");\n'})
    return [
        Outcome(
            "39.3 10 concurrent compiles, one build",
            [srv.stats["compiled"]],
            f"<= {units.MAX_COMPILES_PER_BUILD} compiled",
            srv.stats["compiled"] <= units.MAX_COMPILES_PER_BUILD,
        ),
        Outcome(
            "39.3 .incbin split in two strings", [0 if incbin is None else 1], "refused by the server", incbin is None
        ),
    ]


def case_8_lock_wait(srv: units.UnitServer) -> Outcome:
    os.environ["KB_UNIT_LOCK_WAIT_S"] = "2"
    text = "int kb_locked() { return 8; }\n"
    fd = os.open(
        os.path.join(srv.cache.root, ".locks", units.unit_key("main.cpp", [], text, {}, "cpu") + ".lock"),
        os.O_CREAT | os.O_RDWR,
    )
    fcntl.flock(fd, fcntl.LOCK_EX)
    t0 = time.monotonic()
    try:
        got = srv.answer({"name": "main.cpp", "flags": [], "text": text})
    finally:
        os.close(fd)
        os.environ.pop("KB_UNIT_LOCK_WAIT_S", None)
    waited = time.monotonic() - t0
    return Outcome(
        "39.8 wait on a unit's lock",
        [round(waited, 1)],
        "bounded, then the build compiles",
        got is None and waited < 10,
        note=f"{waited:.1f} s",
    )


def case_4_evicted(cache: str) -> Outcome:
    removed = evict(cache, 0, 0)
    left = [n for n in os.listdir(os.path.join(cache, ".units")) if not n.startswith(".")]
    return Outcome(
        "39.4 evict(0 MB, 0 days) with .units",
        [len(removed)],
        ".units emptied",
        left == [],
        note=f"{len(left)} units left",
    )


def case_5_tmp() -> Outcome:
    os.environ["EVAL_TMP_LIMIT_MB"] = "64"
    try:
        res = run(EVAL_PROBLEMS / "add_one.py", FILL_TMP, correctness_trials=1, timing_trials=0)
    finally:
        os.environ.pop("EVAL_TMP_LIMIT_MB", None)
    m = re.search(r"WROTE (\d+) MB", res.error or "")
    wrote = int(m.group(1)) if m else -1
    return Outcome(
        "39.5 kernel fills /tmp, /var/tmp, /dev/shm",
        [wrote],
        "<= 64 MB (EVAL_TMP_LIMIT_MB)",
        0 <= wrote <= 64,
        note=f"{wrote} MB written",
    )


def case_2_charged(cache: str) -> Outcome:
    """A build 60 MB below its memory limit has the server compile a unit whose compiler needs ~200 MB."""
    cfg = EvaluationConfig(build_cache_dir=cache, timeout_s=600, memory_limit_mb=1536)
    out = prebuild(fills_then_compiles(cfg.memory_limit_mb, room_mb=60), cfg)
    charged = out.status == "crashed" and "with what was done for it" in (out.error or "")
    return Outcome(
        "39.2 server's compile counted as the build's",
        [out.status],
        "crashed: over the memory limit",
        charged,
        note=(out.error or "")[:120],
    )


def case_5_home() -> list[Outcome]:
    outcomes = []
    for unlink in (False, True):
        res = run(
            EVAL_PROBLEMS / "add_one.py",
            FILL_HOME.format(unlink=unlink),
            memory_limit_mb=900,
            file_size_limit_mb=64,
            correctness_trials=1,
            timing_trials=0,
        )
        counted = res.status == "crashed" and "files in its work folder" in (res.error or "")
        how = "unlinked, held open" if unlink else "kept"
        outcomes.append(
            Outcome(
                f"39.5 kernel fills its HOME ({how})",
                [res.status],
                "crashed: files counted as memory",
                counted,
                note=(res.error or "")[:120],
            )
        )
    return outcomes


def replay_units_round4() -> list[Outcome]:
    os.environ["KB_UNITS"] = "1"
    cache = tempfile.mkdtemp(prefix="kb-replay-units-")
    sandbox, srv = _server(cache)
    try:
        outcomes = [
            case_2_connections(srv),
            case_8_lock_wait(srv),
            *case_3_compiles(srv),
        ]  # the wait first: before the build has used its compiles
    finally:
        srv.close()
        sandbox.close()
    outcomes.append(case_4_evicted(cache))
    outcomes.append(case_5_tmp())
    outcomes.append(case_2_charged(tempfile.mkdtemp(prefix="kb-replay-charged-", dir=cache)))
    outcomes += case_5_home()
    shutil.rmtree(cache, ignore_errors=True)
    return outcomes
