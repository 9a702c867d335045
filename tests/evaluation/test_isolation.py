"""The kernel runs without secrets, files, network, a view of the reference, or a future.

One probing kernel tries everything at import and raises with a list of what leaked. Under the
sandbox nothing leaks; with isolation off (or the environment unscrubbed) the same kernel reports
the leaks, which shows that each check can fail.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from evaluation.sandbox.orphans import remove_group_trees
from evaluation.sandbox.sandbox import Sandbox
from tests.evaluation.helpers import EVAL_PROBLEMS, needs_root, run

ADD_ONE = EVAL_PROBLEMS / "add_one.py"

PROBE = """
import os, socket, sys, time
import torch
import torch.nn as nn

leaks = []
try:
    with open({secret_path!r}) as fh:
        leaks.append("file:" + fh.read().strip())
except OSError:
    pass
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
    leaks.append("network")
    s.close()
except OSError:
    pass
for var in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "GITHUB_TOKEN", "DB_PASSWORD"):
    if var in os.environ:
        leaks.append("env:" + var)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as fh:
                if b'"role": "reference"' in fh.read():
                    leaks.append("reference-visible")
        except OSError:
            pass
# A straggler that double-forks and leaves the session: it must not outlive the evaluation.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", {marker!r}])
    os._exit(0)
time.sleep(0.2)
if leaks:
    raise RuntimeError("LEAKED " + " ".join(sorted(set(leaks))))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 1.0
"""


def _stragglers(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


@pytest.fixture
def probe_env(monkeypatch):
    secret_value = secrets.token_hex(8)
    fd, secret_path = tempfile.mkstemp(prefix="kb-secret-", dir="/tmp")
    os.write(fd, secret_value.encode())
    os.close(fd)
    os.chmod(secret_path, 0o600)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    marker = f"{1000 + secrets.randbelow(1000)}.{secrets.randbelow(10**6)}"
    for var in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "GITHUB_TOKEN", "DB_PASSWORD"):
        monkeypatch.setenv(var, "sensitive-" + var.lower())
    src = PROBE.format(secret_path=secret_path, port=port, marker=marker)
    yield {"src": src, "marker": marker, "secret": secret_value}
    server.close()
    os.unlink(secret_path)
    for pid in _stragglers(marker):
        os.kill(pid, 9)


@needs_root
def test_sandbox_blocks_everything(probe_env):
    res = run(ADD_ONE, probe_env["src"], correctness_trials=1, timing_trials=0)
    assert res.status == "correct", (res.error, res.log[-2000:])
    env = res.environment
    assert env["network_isolated"] and env["pid_namespace"] and env["filesystem_isolated"]
    assert env["uid"] != 0 and env["uid"] != env["reference_uid"]
    time.sleep(0.3)
    assert _stragglers(probe_env["marker"]) == []


@needs_root
def test_without_isolation_the_probe_sees_leaks(probe_env):
    res = run(ADD_ONE, probe_env["src"], correctness_trials=1, timing_trials=0, isolation="none")
    assert res.status == "compile_error"
    assert f"file:{probe_env['secret']}" in res.error
    assert "network" in res.error and "reference-visible" in res.error
    assert "env:" not in res.error  # the environment is scrubbed in every mode
    assert res.environment["network_isolated"] is False
    time.sleep(0.3)
    assert _stragglers(probe_env["marker"]) != []  # escaped the process tree: why namespaces matter


def test_environment_scrubbed(probe_env):
    res = run(ADD_ONE, probe_env["src"], correctness_trials=1, timing_trials=0, disable_defences={"env_scrub"})
    assert res.status == "compile_error" and "env:SECRET_KEY" in res.error and "env:DATABASE_URL" in res.error
    res = run(ADD_ONE, probe_env["src"], correctness_trials=1, timing_trials=0)
    assert "env:" not in (res.error or "")


@needs_root
def test_temporary_directories_removed(monkeypatch):
    """Counts only this evaluation's folders: its work root is a folder of its own (other suites on a
    busy host make and remove their own kb-eval-* folders meanwhile)."""
    root = tempfile.mkdtemp(prefix="kb-work-root-", dir="/tmp")
    os.chmod(root, 0o755)
    monkeypatch.setenv("KB_WORK_DIR", root)
    src = (
        "import torch, torch.nn as nn\nopen('scratch.bin', 'wb').write(b'x' * 1000)\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x + 1.0\n"
    )
    try:
        res = run(ADD_ONE, src, correctness_trials=1, timing_trials=0)
        assert res.status == "correct", res.error
        assert os.listdir(root) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- Nothing left behind, nothing of the checkout readable (issue 19, case 7) -----------------------

LEFTOVERS = """
import os
import torch.nn as nn

seen = []
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    path = os.path.join(folder, {name!r})
    with open(path, "w") as fh:
        fh.write("left behind")
    with open(path) as fh:
        assert fh.read() == "left behind"
    os.makedirs(path + ".d/locked", exist_ok=True)
    os.chmod(path + ".d", 0)  # a folder its owner cannot list any more: removal must cope
    seen += [folder + "/" + entry for entry in os.listdir(folder) if entry.startswith("kb-host-")]
with open("/etc/passwd") as fh:
    seen.append("users:" + ",".join(sorted(line.split(":")[0] for line in fh if line.strip())))
try:
    with open({settings!r}) as fh:
        seen.append("settings:" + fh.read(40))
except OSError as exc:
    seen.append("settings refused: " + type(exc).__name__)
raise RuntimeError("SEEN " + " | ".join(seen))


class ModelNew(nn.Module):
    def forward(self, x):
        return x + 1.0
"""


def _isolated() -> bool:
    from evaluation.sandbox.isolation import detect_isolation

    return detect_isolation()["mode"] != "none"


needs_mount_namespace = pytest.mark.skipif(
    not _isolated(),
    reason="private /tmp and hidden folders need a mount namespace (root, or unprivileged user namespaces)",
)


@pytest.fixture(scope="module")
def leftovers_probe():
    """One evaluation of a kernel that writes into /tmp, /var/tmp and /dev/shm, lists them, reads the
    checkout's settings and reports all of it in its error."""
    name = f"kb-leftover-{secrets.token_hex(6)}"
    host_file = os.path.join("/tmp", f"kb-host-{secrets.token_hex(6)}")
    with open(host_file, "w") as fh:
        fh.write("a world-readable file of the host")
    os.chmod(host_file, 0o644)
    settings = str(EVAL_PROBLEMS.parents[2] / "config" / "settings.py")
    res = run(ADD_ONE, LEFTOVERS.format(name=name, settings=settings), correctness_trials=1, timing_trials=0)
    yield res, name
    os.unlink(host_file)
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        path = os.path.join(folder, name)
        if os.path.isdir(path + ".d"):
            os.chmod(path + ".d", 0o700)
        subprocess.run(["rm", "-rf", path, path + ".d"], check=False)


@needs_mount_namespace
def test_a_kernel_leaves_nothing_in_tmp_var_tmp_or_dev_shm(leftovers_probe):
    res, name = leftovers_probe
    assert "SEEN" in (res.error or ""), (res.status, res.error, res.log[-2000:])  # its writes succeeded
    left = [f for f in ("/tmp", "/var/tmp", "/dev/shm") for f in (f"{f}/{name}", f"{f}/{name}.d") if os.path.exists(f)]
    assert left == []
    assert "kb-host-" not in res.error  # its /tmp is its own: the host's files are not in it
    assert res.environment.get("private_tmp") is True


@needs_mount_namespace
def test_a_kernel_sees_no_account_of_the_host(leftovers_probe):
    res, _ = leftovers_probe
    assert re.search(r"users:(kb-sandbox,)?root \|", res.error or ""), res.error


@needs_mount_namespace
def test_a_kernel_cannot_read_the_checkouts_settings(leftovers_probe):
    res, _ = leftovers_probe
    assert "settings refused: FileNotFoundError" in (res.error or ""), res.error
    assert "settings:" not in res.error


def test_the_folders_of_a_killed_work_horse_are_removed(tmp_path, monkeypatch):
    """A work horse SIGKILLed mid-evaluation cannot close its sandbox: the worker removes what its
    process group made (the horse leads its own), by descriptors, never through a link."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("not the sandbox's")
    monkeypatch.setenv("KB_WORK_DIR", str(work))
    pid = os.fork()
    if pid == 0:  # the horse: makes its sandbox, a kernel fills it, and it is killed
        try:
            os.setpgrp()
            box = Sandbox(device="cpu", size_scale=1, memory_limit_mb=512, isolation="none")
            os.makedirs(os.path.join(box.src, "locked", "deep"))
            os.symlink(outside, os.path.join(box.src, "link"))
            os.symlink(outside / "keep", os.path.join(box.src, "locked", "file-link"))
            os.chmod(os.path.join(box.src, "locked"), 0)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    (left,) = os.listdir(work)
    assert left.startswith(f"kb-eval-g{pid}-")
    assert remove_group_trees(pid) == [str(work / left)]
    assert os.listdir(work) == [] and (outside / "keep").read_text() == "not the sandbox's"


def test_a_sandbox_thousands_of_folders_deep_is_closed_and_removed(tmp_path, monkeypatch):
    """A kernel nests 2000 folders in its sandbox (Python 3.11's recursive rmtree raised
    RecursionError there, and the evaluation left its sandbox and its lent build entry behind)."""
    from tests.unit.test_safe_files_depth import _nest  # deferred: a helper of another suite

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("KB_WORK_DIR", str(work))
    box = Sandbox(device="cpu", size_scale=1, memory_limit_mb=512, isolation="none")
    _nest(box.src)
    box.close()
    assert os.listdir(work) == []


def test_the_build_entry_is_released_even_if_closing_the_sandbox_fails(tmp_path, monkeypatch):
    """Whatever ``Sandbox.close`` raises, ``_release_build`` runs: the entry is unlocked (else every
    later evaluation of the source waits on it) and nothing stays lent."""
    from evaluation.builds.stage import build_dir_for  # deferred: only this test uses it
    from evaluation.results.types import EvaluationConfig  # deferred: only this test uses it

    real_close = Sandbox.close

    def close_then_fail(self):
        real_close(self)
        raise RecursionError("what a 3000-level tree did to shutil.rmtree")

    monkeypatch.setattr(Sandbox, "close", close_then_fail)
    src = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x + 1.0\n"
    cache = str(tmp_path / "cache")
    with pytest.raises(RecursionError):
        run(EVAL_PROBLEMS / "add_one.py", src, correctness_trials=1, timing_trials=0, build_cache_dir=cache)
    entry = build_dir_for(src, EvaluationConfig(build_cache_dir=cache))
    assert entry.lock(wait=False)  # not held by the failed evaluation
    entry.unlock()
