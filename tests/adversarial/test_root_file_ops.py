"""Issue 28, cases 2, 3, 4 and 8: the root worker's file operations on what kernels can write.

Real kernels through the real sandbox on the CPU (``root`` mode: separate uids, namespaces), plus
one deterministic replay of the race of case 2 (the swap made at the worst moment, by a hook on
``os.rename``; the file operations themselves are real). Kernels: tests/adversarial/round3_kernels.py.
"""

from __future__ import annotations

import os
import stat
import threading
from types import SimpleNamespace

import pytest

from evaluation.builds.cache_evict import evict
from evaluation.builds.entry import BuildDir
from evaluation.builds.stage import build_dir_for
from evaluation.results.types import EvaluationConfig
from evaluation.sandbox.process import ChildError
from evaluation.sandbox.sandbox import Sandbox
from tests.adversarial.round3_kernels import planter, snooper, swapper
from tests.evaluation.helpers import EVAL_PROBLEMS, needs_root, run

ADD_ONE = EVAL_PROBLEMS / "add_one.py"


@pytest.fixture
def victim(tmp_path):
    """A root-owned host file outside every sandbox."""
    path = tmp_path / "host" / "victim.conf"
    path.parent.mkdir()
    path.write_text("host data\n")
    os.chmod(path, 0o644)
    return path


def _owner_and_mode(path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


# -- case 2: hand_over -----------------------------------------------------------------------------


def test_hand_over_gives_away_only_the_file_it_checked(tmp_path, victim, monkeypatch):
    """The kernel swaps its output for a link between the worker's check and its rename: the link
    lands in the reference's folder, and a chown by path would give the host file away."""
    src, dst = tmp_path / "kernel", tmp_path / "reference"
    src.mkdir()
    dst.mkdir()
    out = src / "out_0.pt"
    out.write_bytes(b"outputs")
    kernel_uid, ref_uid = (4242, 4243) if os.geteuid() == 0 else (None, None)
    if kernel_uid is not None:
        os.chown(out, kernel_uid, kernel_uid)
    real_rename = os.rename

    def swap_then_rename(a, b, *args, **kw):
        if str(a) == str(out):  # the kernel wins the race: a link where its output was
            os.unlink(out)
            os.symlink(victim, out)
        return real_rename(a, b, *args, **kw)

    monkeypatch.setattr(os, "rename", swap_then_rename)
    sandbox = Sandbox.__new__(Sandbox)  # hand_over needs no processes, only the two folders
    ker = SimpleNamespace(role="kernel", spec={"workdir": str(src), "uid": kernel_uid})
    ref = SimpleNamespace(role="reference", spec={"workdir": str(dst), "uid": ref_uid})
    before = _owner_and_mode(victim)
    with pytest.raises(ChildError, match="invalid output file"):
        sandbox.hand_over(ker, ref, "out_0.pt", "kernel_out_0.pt")
    assert _owner_and_mode(victim) == before
    assert not os.path.lexists(dst / "kernel_out_0.pt")  # what landed instead was removed


@needs_root
def test_a_kernel_swapping_its_outputs_for_links_cannot_chown_a_host_file(tmp_path, victim):
    """Case 2 as it was found: a process of the kernel exchanges out_N.pt with a link in a loop."""
    before = _owner_and_mode(victim)
    outcomes = []
    for attempt in range(3):
        res = run(
            ADD_ONE,
            swapper(str(victim)),
            correctness_trials=8,
            timing_trials=0,
            build_cache_dir=str(tmp_path / "cache"),
            seed=attempt,
        )
        assert res.environment.get("isolation_mode") == "root"
        outcomes.append(res.status)
        assert _owner_and_mode(victim) == before, (attempt, res.status, res.error)
        assert res.status in ("correct", "runtime_error", "crashed", "incorrect"), res.error
    print("outcomes:", outcomes)


# -- case 3: the build-cache entry -----------------------------------------------------------------


def _cfg(tmp_path, **kw) -> EvaluationConfig:
    return EvaluationConfig(build_cache_dir=str(tmp_path / "cache"), **kw)


@needs_root
def test_a_planted_link_never_makes_the_worker_remove_a_host_file(tmp_path):
    folder = tmp_path / "host-folder"
    folder.mkdir()
    (folder / "lock").write_text("the host's\n")
    source = planter("link", folder=str(folder))
    for _ in range(2):  # the second evaluation locks the entry again: _clean_stale
        res = run(ADD_ONE, source, correctness_trials=1, timing_trials=0, build_cache_dir=str(tmp_path / "cache"))
        assert res.status == "correct", (res.error, res.log[-2000:])
        assert (folder / "lock").exists()
    entry = build_dir_for(source, _cfg(tmp_path))
    assert entry.built and not os.path.lexists(os.path.join(entry.path, "torch_extensions", "lnk"))


@needs_root
def test_a_planted_ninja_log_link_is_not_read_as_root(tmp_path):
    secret = tmp_path / "root-only"
    secret.write_text("0\t1000\t1\tTHE-HOST-SECRET\tab\n")
    os.chmod(secret, 0o600)
    res = run(
        ADD_ONE,
        planter("ninja_log_link", secret=str(secret)),
        correctness_trials=1,
        timing_trials=0,
        build_cache_dir=str(tmp_path / "cache"),
    )
    assert res.status == "correct", (res.error, res.log[-2000:])
    assert "build_steps_s" in res.environment  # the build stage ran and its steps were read
    assert "THE-HOST-SECRET" not in repr(res.environment) + res.log


@needs_root
def test_a_planted_fifo_does_not_block_the_worker(tmp_path):
    results = []
    worker = threading.Thread(
        target=lambda: results.append(
            run(
                ADD_ONE, planter("fifo"), correctness_trials=1, timing_trials=0, build_cache_dir=str(tmp_path / "cache")
            )
        ),
        daemon=True,
    )
    worker.start()
    worker.join(240)
    assert not worker.is_alive(), "the worker is blocked (open() of a FIFO the kernel planted)"
    assert results[0].status == "correct", (results[0].error, results[0].log[-2000:])


# -- case 4: what the cache keeps ------------------------------------------------------------------


def _entry_tree(path: str) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), path)] = (st.st_uid, stat.S_IMODE(st.st_mode))
    return out


@needs_root
def test_the_cache_keeps_only_the_builds_files_the_workers_and_closed(tmp_path):
    source = planter("leftovers")
    res = run(ADD_ONE, source, correctness_trials=1, timing_trials=0, build_cache_dir=str(tmp_path / "cache"))
    assert res.status == "correct", (res.error, res.log[-2000:])
    entry = build_dir_for(source, _cfg(tmp_path))
    assert entry.built
    tree = _entry_tree(entry.path)
    assert "torch_extensions/kernel_phase.bin" not in tree  # written in the kernel phase: gone
    assert tree["torch_extensions/open"] == (0, 0o755)  # made 0777 in the build: published 0755
    assert all(uid == 0 and not mode & 0o022 for uid, mode in tree.values()), tree
    assert stat.S_IMODE(os.stat(entry.path).st_mode) == 0o700


@needs_root
def test_a_build_over_the_entrys_budget_is_not_published(tmp_path):
    source = planter("big")
    res = run(
        ADD_ONE,
        source,
        correctness_trials=1,
        timing_trials=0,
        build_cache_dir=str(tmp_path / "cache"),
        build_entry_max_mb=1,
    )
    assert res.status == "correct", (res.error, res.log[-2000:])  # the kernel is still judged
    entry = build_dir_for(source, _cfg(tmp_path, build_entry_max_mb=1))
    assert not entry.built and not os.path.lexists(entry.path)
    assert os.listdir(os.path.join(str(tmp_path / "cache"), ".building")) == []


def _published(root: str, tag: str, size: int, age_s: float) -> BuildDir:
    b = BuildDir(root, f"# load_inline {tag}", "cpu")
    assert b.lock() and b.begin()
    with open(os.path.join(b.path, "torch_extensions", "blob"), "wb") as fh:
        fh.write(b"x" * size)
    assert b.publish()
    b.unlock()
    lock = os.path.join(root, ".locks", b.key + ".lock")
    old = os.stat(lock).st_mtime - age_s
    os.utime(lock, (old, old))
    return b


def test_the_cache_is_evicted_by_age_then_by_size(tmp_path):
    root = str(tmp_path)
    ancient = _published(root, "ancient", 1000, 40 * 86400)
    older = _published(root, "older", 400_000, 3600)
    newer = _published(root, "newer", 400_000, 60)
    busy = _published(root, "busy", 400_000, 7200)
    assert busy.lock()  # in use: never evicted
    removed = evict(root, max_total_mb=1, max_age_days=30)
    busy.unlock()
    assert sorted(removed) == sorted([ancient.key, older.key])
    assert newer.built and busy.built and not ancient.built and not older.built


# -- case 8: what kernels can read of the worker's -------------------------------------------------


@needs_root
def test_kernels_read_no_log_of_the_reference_and_list_no_cache(tmp_path):
    res = run(ADD_ONE, snooper(), correctness_trials=1, timing_trials=0, build_cache_dir=str(tmp_path / "cache"))
    assert res.status == "correct", (res.error, res.log[-2000:])  # incorrect when it read something
    assert "SNOOP ref-log: denied" in res.log, res.log[-2000:]
    assert "SNOOP cache-list: denied" in res.log, res.log[-2000:]


# -- give_to: the build folder handed to the build's uid and back, by descriptors -----------------


@needs_root
def test_give_to_follows_no_planted_link_even_when_a_folder_is_swapped_mid_walk(tmp_path, monkeypatch):
    """A link planted in the build folder is not followed, and a folder the walk is about to list,
    swapped for a link to a host folder at that moment (a live kernel process), is not entered:
    the walk holds a descriptor of the folder it checked. By path (``os.walk`` + ``lchown``), the
    host folder's files became the kernel's."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("host\n")
    b = BuildDir(str(tmp_path / "cache"), "# load_inline give_to", "cpu")
    assert b.lock() and b.begin()
    sub = os.path.join(b.path, "torch_extensions", "sub")
    os.makedirs(sub)
    os.symlink(host / "secret", os.path.join(b.path, "torch_extensions", "lnk"))
    real_scandir = os.scandir

    def swap_then_list(arg=".", *a, **kw):
        listed = os.readlink(f"/proc/self/fd/{arg}") if isinstance(arg, int) else os.fspath(arg)
        if listed.endswith("/torch_extensions/sub") and not os.path.islink(sub):
            os.rename(sub, sub + ".real")
            os.symlink(host, sub)
        return real_scandir(arg, *a, **kw)

    monkeypatch.setattr(os, "scandir", swap_then_list)
    b.give_to(4242)
    monkeypatch.undo()
    for path in (host, host / "secret"):
        assert os.lstat(path).st_uid == 0, path
    assert os.stat(sub + ".real").st_uid == 4242  # the folder it checked was handed over
    assert os.lstat(os.path.join(b.path, "torch_extensions", "lnk")).st_uid == 0  # links left as they are
    b.give_to(0)
    b.abandon()
    b.unlock()
