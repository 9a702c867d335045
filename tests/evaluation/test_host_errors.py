"""Issue 20 case 1 in the scoring library: a failure of the host (no space, quota, I/O error, a
sandbox that cannot start) ends an evaluation with status `infrastructure_error`, never a verdict;
a kernel that only pretends one is judged as usual."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest

from evaluation import INFRASTRUCTURE_ERROR, STATUSES, runner
from evaluation.phases.session import Abort
from evaluation.sandbox.host_errors import STALE_ENTRY, confirm, counts_against_host, host_error, low_space, stale_entry
from tests.evaluation.helpers import EVAL_PROBLEMS, read, run, self_kernel
from tests.tmpfs import fill, small_tmpfs

MATMUL = EVAL_PROBLEMS / "matmul_small.py"


@pytest.fixture
def tmpfs():
    try:
        with small_tmpfs(size_mb=32) as path:
            yield path
    except OSError as exc:
        pytest.skip(f"no small tmpfs here: {exc}")


def test_host_errors_are_told_from_the_codes_errors():
    assert host_error(OSError(errno.ENOSPC, "No space left on device", "/tmp/x")) == (
        "ENOSPC: No space left on device (/tmp/x)"
    )
    assert host_error(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert host_error(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"))
    try:
        try:
            raise OSError(errno.EIO, "Input/output error")
        except OSError as inner:
            raise RuntimeError("saving failed") from inner
    except RuntimeError as outer:
        assert host_error(outer) == "EIO: Input/output error"
    assert host_error(ValueError("shapes do not match")) is None
    assert host_error(OSError(errno.ENOENT, "No such file or directory")) is None
    assert INFRASTRUCTURE_ERROR not in STATUSES  # not a verdict


def test_a_nearly_full_folder_is_found(tmpfs):
    assert confirm([str(tmpfs)]) is None and low_space({"scratch": str(tmpfs)}, 1) is None
    fill(tmpfs, leave_kb=16)
    assert "MB free in" in confirm([str(tmpfs)])
    assert low_space({"scratch": str(tmpfs / "not-made-yet")}, 1).startswith("only 0 MB free in the scratch folder")


def test_a_correct_kernel_on_a_full_scratch_disk_gets_no_verdict(tmpfs, monkeypatch):
    monkeypatch.setenv("KB_WORK_DIR", str(tmpfs))
    fill(tmpfs, leave_kb=12)  # room to start, not to save the kernel's outputs (torch.save)
    res = run(MATMUL, self_kernel(read(MATMUL)), correctness_trials=1, timing_trials=0)
    assert res.status == INFRASTRUCTURE_ERROR, (res.status, res.error)
    assert "unexpected pos" in res.error or "No space" in res.error or "ENOSPC" in res.error, res.error
    assert "the host: only" in res.error or "could not set up" in res.error


def test_a_sandbox_that_cannot_be_set_up_is_the_hosts_failure(tmpfs, monkeypatch):
    monkeypatch.setenv("KB_WORK_DIR", str(tmpfs))
    fill(tmpfs, leave_kb=0)
    res = run(MATMUL, self_kernel(read(MATMUL)), correctness_trials=1, timing_trials=0)
    assert (res.status, res.error) == (
        INFRASTRUCTURE_ERROR,
        "could not set up the sandbox: ENOSPC: No space left on device",
    )


def test_a_kernel_that_raises_enospc_itself_on_a_roomy_host_is_judged():
    kernel = (
        self_kernel(read(MATMUL))
        .replace("class ModelNew(", "import errno\n\nclass ModelNew(", 1)
        .replace("return torch.relu(a @ b) + self.bias", 'raise OSError(errno.ENOSPC, "No space left on device")')
    )
    assert "raise OSError" in kernel
    res = run(MATMUL, kernel, correctness_trials=1, timing_trials=0)
    assert res.status == "runtime_error", (res.status, res.error)
    assert "the host had room" in res.error


def test_a_cached_build_torch_could_not_rewrite_is_no_verdict_and_not_the_hosts_failure():
    ext = "/var/tmp/kb-build-cache-0/f574cce40689373cf7472071/torch_extensions"
    denied = f"PermissionError: [Errno 13] Permission denied: '{ext}/prod_dim_module/build.ninja'"
    reason = stale_entry(denied, ext)
    assert reason and reason.startswith(STALE_ENTRY) and not counts_against_host(reason)
    assert stale_entry(denied, "/var/tmp/kb-build-cache-0/another/torch_extensions") is None  # not this entry
    assert stale_entry(denied.replace("build.ninja", "main.o"), ext) is None  # another file: the kernel's to explain
    assert stale_entry(denied.replace("[Errno 13]", "[Errno 1]"), ext) is None
    assert stale_entry(denied, "") is None  # no entry lent


def test_a_stale_entry_is_told_from_any_failure_of_the_kernels_process_and_only_a_lent_entrys():
    """A load_inline in __init__ or forward fails as compile or runtime error in the kernel's
    process: the parent reads the text for every kernel-side failure, against the lent entry only."""
    build = SimpleNamespace(path="/cache/key", private=None)
    denied = "PermissionError: [Errno 13] Permission denied: '/cache/key/torch_extensions/ext/build.ninja'"
    for status in ("compile_error", "runtime_error", INFRASTRUCTURE_ERROR):
        ab = runner._stale_entry(build, Abort(status, "kernel: " + denied, kernel_side=True))
        assert ab is not None and ab.status == INFRASTRUCTURE_ERROR and ab.error.startswith(STALE_ENTRY)
    assert runner._stale_entry(build, Abort("compile_error", denied)) is None  # the reference's: trusted as it is
    assert (
        runner._stale_entry(
            SimpleNamespace(path="/cache/key", private="/cache/.building/x"),
            Abort("compile_error", denied, kernel_side=True),
        )
        is None
    )  # its own folder: writable
