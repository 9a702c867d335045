"""The build cache without a compiler: the key, private folders published by rename, dead owners."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evaluation.builds import entry
from evaluation.builds.entry import BUILT_MARKER, BuildDir, build_key, key_paths, needs_build, torch_cuda_home
from evaluation.builds.stage import BuildOutcome, default_build_workers, ninja_steps, prebuild
from evaluation.results.types import EvaluationConfig

SRC = "from torch.utils.cpp_extension import load_inline\n"


def test_key_has_no_device_index(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    on_gpu0 = build_key(SRC, "cuda", "9.0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert build_key(SRC, "cuda", "9.0") == on_gpu0
    assert build_key(SRC, "cuda", "8.0") != on_gpu0  # the architecture is part of it
    assert build_key(SRC + " ", "cuda", "9.0") != on_gpu0
    assert build_key(SRC, "cpu") != on_gpu0
    monkeypatch.setenv("CXX", "clang++")
    assert build_key(SRC, "cuda", "9.0") != on_gpu0  # so is the compiler


def test_another_checkout_or_environment_gets_entries_of_its_own(monkeypatch):
    here = build_key(SRC, "cpu")
    monkeypatch.setattr(entry, "PACKAGE_DIR", "/srv/another-checkout/evaluation")
    assert build_key(SRC, "cpu") != here  # ninja's file names the package's compiler shims
    monkeypatch.undo()
    monkeypatch.setattr(entry.sysconfig, "get_path", lambda name, scheme: "/opt/another-python/include")
    assert build_key(SRC, "cpu") != here  # and Python's headers (torch's own folder likewise)
    monkeypatch.undo()
    assert build_key(SRC, "cpu", root="/mnt/cache") != build_key(SRC, "cpu", root="/srv/cache")  # the cache's path


def test_the_cuda_toolkit_in_the_key_is_the_one_torch_finds_in_the_sandbox(tmp_path, monkeypatch):
    """CUDA_HOME or CUDA_PATH as given; else nvcc on the sandbox's PATH (not the worker's)."""
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-x")
    assert torch_cuda_home() == "/opt/cuda-x" and "/opt/cuda-x" in key_paths("cuda")
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    elsewhere = tmp_path / "bin"
    elsewhere.mkdir()
    (elsewhere / "nvcc").write_text("#!/bin/sh\n")
    (elsewhere / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{elsewhere}:{os.environ['PATH']}")  # the worker's PATH only
    assert torch_cuda_home() != str(tmp_path)
    monkeypatch.setattr(entry, "sandbox_path", lambda: str(elsewhere))
    assert torch_cuda_home() == str(tmp_path)


def test_one_entry_serves_every_device(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    first = BuildDir(str(tmp_path), SRC, "cuda", "9.0")
    assert first.lock() and first.begin()
    assert first.publish()
    first.unlock()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    second = BuildDir(str(tmp_path), SRC, "cuda", "9.0")
    assert second.path == first.path and second.built


def test_a_build_is_published_only_complete(tmp_path):
    b = BuildDir(str(tmp_path), SRC, "cpu")
    assert b.lock()
    private = b.begin()
    assert private and os.path.islink(b.path) and os.path.realpath(b.path) == os.path.realpath(private)
    assert not b.built  # a link to a build in progress is not an entry
    with open(os.path.join(b.path, "torch_extensions", "out.so"), "w") as fh:  # written through the link
        fh.write("x")
    assert b.publish()
    assert b.built and not os.path.islink(b.path) and not os.path.exists(private)
    assert os.path.exists(os.path.join(b.path, "torch_extensions", "out.so"))
    assert os.listdir(os.path.join(str(tmp_path), ".building")) == []
    b.unlock()


def _die_while_building(root: str) -> str:
    """A process that takes the lock, starts a build, leaves torch's lock file and is SIGKILLed."""
    code = (
        "import os, sys, signal\n"
        "from evaluation.builds.entry import BuildDir\n"
        f"b = BuildDir({root!r}, {SRC!r}, 'cpu')\n"
        "assert b.lock(); p = b.begin()\n"
        "os.makedirs(os.path.join(b.path, 'torch_extensions', 'ext'))\n"
        "open(os.path.join(b.path, 'torch_extensions', 'ext', 'lock'), 'w').close()\n"
        "print(p, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert r.returncode == -9, r.stderr
    return r.stdout.strip()


def test_a_dead_builder_is_cleaned_up_never_waited_on(tmp_path):
    private = _die_while_building(str(tmp_path))
    assert os.path.isdir(private)
    b = BuildDir(str(tmp_path), SRC, "cpu")
    assert b.lock(wait=False)  # the owner's death released its lock: no waiting
    assert not os.path.exists(b.path) and not os.path.exists(private)  # its half build is gone
    assert b.begin() and b.publish()
    b.unlock()


def test_stale_torch_locks_in_an_entry_are_removed(tmp_path):
    b = BuildDir(str(tmp_path), SRC, "cpu")
    assert b.lock() and b.begin()
    ext = os.path.join(b.path, "torch_extensions", "kb_ext")
    os.makedirs(ext)
    b.publish()
    b.unlock()
    for name in ("lock", ".ninja_lock"):  # what a load_inline killed while loading leaves
        open(os.path.join(ext, name), "w").close()
    again = BuildDir(str(tmp_path), SRC, "cpu")
    assert again.lock()
    assert sorted(os.listdir(ext)) == []
    again.unlock()


def test_a_compiler_error_is_recorded_and_served(tmp_path):
    cfg = EvaluationConfig(build_cache_dir=str(tmp_path))
    b = BuildDir(str(tmp_path), SRC, "cpu")
    assert b.lock() and b.begin()
    b.publish({"error": "RuntimeError: main.cpp:3: error: expected ';'", "log": "full log"})
    b.unlock()
    out = prebuild(SRC, cfg)
    assert out.status == "compile_error" and "expected ';'" in out.error and out.log == "full log"
    assert os.path.exists(os.path.join(b.path, BUILT_MARKER))


def test_what_needs_a_build():
    assert needs_build(SRC)
    assert needs_build("from torch.utils import cpp_extension")
    assert not needs_build("import triton\n@triton.jit\ndef k(): pass")
    assert prebuild("import torch\n", EvaluationConfig()).status == "not_needed"


def test_pool_size_from_setting_and_cores(monkeypatch):
    monkeypatch.setenv("KB_BUILD_WORKERS", "5")
    assert default_build_workers() == 5
    monkeypatch.delenv("KB_BUILD_WORKERS")
    assert default_build_workers(gpus=1) >= 1


def test_ninja_steps_read_from_the_log(tmp_path):
    ext = tmp_path / "torch_extensions" / "kb_x"
    ext.mkdir(parents=True)
    (ext / ".ninja_log").write_text("# ninja log v5\n0\t31500\t1\tmain.o\tab\n31500\t33000\t1\tkb_x.so\tcd\n")
    assert ninja_steps(str(tmp_path)) == {"kb_x/main.o": 31.5, "kb_x/kb_x.so": 1.5}


def test_outcome_dict():
    assert BuildOutcome("built", 1.23456).to_dict()["seconds"] == pytest.approx(1.235)
