"""The host's precompiled torch headers (``evaluation.builds.pch``), with real gcc builds on the CPU.

- two C++ ``load_inline`` kernels built through the build stage, each including
  ``torch/extension.h`` in its own source (as most kernels do: ``main.cpp`` then includes it twice):
  the first waits for the headers, the second finds them published and proven, and gcc uses them for
  the second kernel's ``main.cpp`` (``-H`` with the very flags and environment of that build prints
  ``! <header>.gch``). Before the real header lay beside the ``.gch``, the second build ended
  ``compile_error`` "<cache>/.pch/<key>/include/torch/extension.h: No such file or directory";
- headers that fail a compile are proven broken before any build uses them, and a build whose
  compile error names the headers' folder is built again without them (no verdict from them);
- the same kernel built the old way (no headers) and the new way: the same object file byte for
  byte, the same exported functions, bitwise the same outputs;
- a header build SIGKILLed midway leaves no lock, no published entry, no compiler running; the
  next build takes the lock at once and publishes;
- the headers are root's and read-only to the kernel's uid (root only).
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from evaluation.builds.pch import HEADER, MANIFEST, HeaderCache, lock_held, prove
from evaluation.builds.stage import build_dir_for, header_cache_for, prebuild
from evaluation.results.types import EvaluationConfig
from tests.evaluation.helpers import ROOT, WRAPPER_NAME, BackgroundBuild, needs_cuda
from tests.evaluation.helpers import wrapper_kernel as kernel

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),  # a header build is ~100 s of CPU: far longer on a loaded host
    pytest.mark.skipif(
        subprocess.run(["sh", "-c", "command -v c++ && command -v ninja"], capture_output=True).returncode != 0,
        reason="needs a C++ compiler and ninja",
    ),
]


@pytest.fixture(autouse=True)
def _one_variant(monkeypatch):
    monkeypatch.setenv("KB_PCH", "1")
    monkeypatch.setenv("KB_PCH_VARIANTS", "default")  # one header build (the kernels pass no -O)


def _cfg(cache: str) -> EvaluationConfig:
    return EvaluationConfig(build_cache_dir=cache, timeout_s=9000)


def _ext_dir(cache: str, source: str) -> str:
    entry = build_dir_for(source, _cfg(cache)).path or ""
    (ext,) = glob.glob(os.path.join(entry, "torch_extensions", "*"))
    return ext


def _uses_pch(cache: str, source: str) -> list[str]:
    """gcc's own word on the build's main.cpp: with the build's compiler, flags and environment,
    ``-H`` lists the precompiled header it uses as ``! path`` (an invalid one as ``x path``)."""
    ext = _ext_dir(cache, source)
    with open(os.path.join(ext, "build.ninja"), encoding="utf-8") as fh:
        lines = dict(line.split(" = ", 1) for line in fh.read().splitlines() if " = " in line)
    env = {**os.environ, **header_cache_for(_cfg(cache)).env()}
    cmd = [
        *shlex.split(lines["cxx"]),
        *shlex.split(lines["cflags"]),
        "-Winvalid-pch",
        "-H",
        "-fsyntax-only",
        os.path.join(ext, "main.cpp"),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [line for line in r.stderr.splitlines() if line.startswith(("! ", "x "))]


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory, plain_wrapper, broken_build):
    """Two kernels through the build stage into one fresh cache (headers on), and the second
    kernel's wrapper built with the headers off (the old path: the session's plain build). The
    header build takes one core: the plain build and ``broken_build`` (each in its own cache and
    process, never touching these headers) take the other meanwhile."""
    mp = pytest.MonkeyPatch()
    mp.setenv("KB_PCH", "1")
    mp.setenv("KB_PCH_VARIANTS", "default")
    mp.setenv("KB_PCH_WAIT_S", "3000")  # the first build waits for the headers, however slow the host
    plain_wrapper.start()
    broken_build.start()
    try:
        cache = str(tmp_path_factory.mktemp("kb-pch-cache"))
        a, b = kernel("kb_pch_a"), plain_wrapper.source
        first, second = prebuild(a, _cfg(cache)), prebuild(b, _cfg(cache))
    finally:
        mp.undo()
        old = plain_wrapper.result()
        broken_build.result()
    return cache, plain_wrapper.cache, (a, b), (first, second, old)


def test_the_second_kernel_reuses_the_headers_the_first_built(two_builds):
    cache, _old_cache, (a, b), (first, second, old) = two_builds
    assert first.status == second.status == old.status == "built", (first.error, first.log[-2000:])
    assert (first.headers, second.headers, old.headers) == ("built", "shared", "none")
    assert (first.headers_why, second.headers_why, old.headers_why) == ("", "", "off (KB_PCH=0)")
    assert second.headers_s == 0.0  # nothing waited for, nothing built
    headers = header_cache_for(_cfg(cache))
    assert headers.ready and os.listdir(os.path.join(headers.root, ".building")) == []
    assert set(headers.manifest()["proof"]) == {"default"}  # compiled through them in the sandbox first
    assert os.path.isfile(os.path.join(headers.include_dir, HEADER))  # what a second #include opens
    assert len([n for n in os.listdir(headers.root) if not n.startswith(".")]) == 1  # one build per key
    used = _uses_pch(cache, b)
    assert used and used[0].startswith("! ") and used[0].endswith("default.gch"), used
    main_o = {name: s for name, s in (first.steps_s | second.steps_s | old.steps_s).items() if name.endswith("main.o")}
    print(
        f"headers built in {first.headers_s:.1f} s ({headers.manifest().get('cpu_s')} s CPU); "
        f"main.o: {json.dumps(main_o)}"
    )
    print(f"build process tree: first {first.to_dict()}, second {second.to_dict()}, old {old.to_dict()}")


def test_the_same_kernel_built_both_ways_is_the_same(two_builds):
    cache, old_cache, (_a, b), _outcomes = two_builds
    new_ext, old_ext = _ext_dir(cache, b), _ext_dir(old_cache, b)
    with open(os.path.join(new_ext, "main.o"), "rb") as fh_new, open(os.path.join(old_ext, "main.o"), "rb") as fh_old:
        assert fh_new.read() == fh_old.read()
    assert_same_module([os.path.join(d, f"{WRAPPER_NAME}.so") for d in (new_ext, old_ext)], WRAPPER_NAME)


def assert_same_module(libs: list[str], name: str, scale: float = 1.5) -> None:
    """Two builds of ``benchmarks.wrapper_kernel.WRAPPER_KERNEL`` (module ``name``), loaded in a fresh process: the
    same exported functions, bitwise the same outputs."""
    probe = (
        "import importlib.util, sys, torch\n"
        "outs = []\n"
        "for path in sys.argv[1:]:\n"
        f"    spec = importlib.util.spec_from_file_location({name!r}, path)\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "    x = torch.randn(4096, generator=torch.Generator().manual_seed(7))\n"
        f"    outs.append((sorted(n for n in dir(m) if not n.startswith('__')), m.scale_shift(x, {scale!r})))\n"
        "assert outs[0][0] == outs[1][0] == ['scale_shift'], (outs[0][0], outs[1][0])\n"
        "assert outs[0][1].view(torch.int32).equal(outs[1][1].view(torch.int32))\n"
        "print('same')\n"
    )
    r = subprocess.run([sys.executable, "-c", probe, *libs], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stdout + r.stderr


def _processes_naming(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _wait_for_compiler(building: str, seconds: float = 600) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(_comm(p) == "cc1plus" for p in _processes_naming(building)):
            return True
        time.sleep(0.2)
    return False


def _kill_builders(key: str) -> None:
    for pid in _processes_naming("builder_main"):  # the unshare process and the builder in it
        try:
            if key in open(f"/proc/{pid}/cmdline").read():
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_header_build_killed_midway_leaves_nothing_to_wait_on(tmp_path):
    cache = str(tmp_path)
    headers = HeaderCache(cache, "cpu")
    building = os.path.join(headers.root, ".building")
    # A worker process needs the headers and starts their builder (detached, holding the lock).
    code = f"from evaluation.builds.pch import HeaderCache; HeaderCache({cache!r}, 'cpu').ensure(wait_s=3000)"
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ))
    try:
        assert _wait_for_compiler(building), "the header build never reached the compiler"
        assert lock_held(headers.lock_path)  # the builder holds the lock
        time.sleep(1.0)
        worker.send_signal(signal.SIGKILL)  # the worker dies: its builder does not (it is detached)
        worker.wait()
        time.sleep(0.5)
        assert lock_held(headers.lock_path) and _processes_naming(building)
        (dead_private,) = os.listdir(building)
        _kill_builders(headers.key)  # now the header build itself is killed, midway
        gone_by = time.monotonic() + 20
        while _processes_naming(building) and time.monotonic() < gone_by:
            time.sleep(0.2)
        assert _processes_naming(building) == []  # its compilers died with it
        assert not headers.ready and not os.path.exists(headers.path)  # nothing half-built was published
        assert not lock_held(headers.lock_path)  # free at once: nobody would wait on it
        assert os.listdir(building) == [dead_private]  # the dead builder's private folder, left
        # The next build that needs them: it never waits on the dead builder (wait_s=0 returns at
        # once), and a new builder takes the lock, removes the dead one's folder and compiles.
        t0 = time.monotonic()
        assert headers.ensure(wait_s=0.0) is False
        assert time.monotonic() - t0 < 5.0
        assert _wait_for_compiler(building)
        assert lock_held(headers.lock_path) and dead_private not in os.listdir(building)
    finally:
        worker.kill()
        _kill_builders(headers.key)  # the full build is the other tests' (it costs ~100 s of CPU)


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch needs root")
def test_the_headers_are_read_only_to_kernels(two_builds):
    cache = two_builds[0]
    headers = header_cache_for(_cfg(cache))
    for dirpath, dirnames, filenames in os.walk(headers.root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            st = os.lstat(name)
            assert st.st_uid == 0 and not st.st_mode & 0o022, name
    assert os.stat(os.path.join(headers.root, ".locks")).st_mode & 0o077 == 0


CUDA_KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
#include <torch/extension.h>
__global__ void scale_shift_kernel(const float* x, float* o, float a, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) o[i] = x[i] * a + 0.25f;
}
torch::Tensor scale_shift(torch::Tensor x, double a) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    scale_shift_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), out.data_ptr<float>(), (float)a, n);
    return out;
}
"""

ext = load_inline(name="kb_pch_cuda", cpp_sources="torch::Tensor scale_shift(torch::Tensor x, double a);",
                  cuda_sources=CUDA_SRC, functions=["scale_shift"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale_shift(x, 1.5)
'''


@needs_cuda
def test_a_cuda_kernel_built_both_ways_is_the_same(tmp_path, monkeypatch):
    """GPU variant (skips without CUDA): the same CUDA load_inline kernel built with the headers off
    and on, for the GPU's architecture: the same wrapper object, the same exported functions,
    bitwise the same outputs on the GPU."""
    monkeypatch.setenv("KB_PCH_WAIT_S", "3000")
    caches = {}
    for pch in ("0", "1"):
        monkeypatch.setenv("KB_PCH", pch)
        cache = str(tmp_path / f"pch{pch}")
        cfg = EvaluationConfig(device="cuda", build_cache_dir=cache, timeout_s=9000)
        out = prebuild(CUDA_KERNEL, cfg)
        assert out.status == "built", (out.error, out.log[-3000:])
        assert out.headers == ("built" if pch == "1" else "none")
        (ext,) = glob.glob(os.path.join(build_dir_for(CUDA_KERNEL, cfg).path or "", "torch_extensions", "*"))
        caches[pch] = ext
    with open(os.path.join(caches["0"], "main.o"), "rb") as a, open(os.path.join(caches["1"], "main.o"), "rb") as b:
        assert a.read() == b.read()
    probe = (
        "import importlib.util, sys, torch\n"
        "outs = []\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('kb_pch_cuda', path)\n"
        "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(7)).cuda()\n"
        "    outs.append((sorted(n for n in dir(m) if not n.startswith('__')), m.scale_shift(x, 1.5).cpu()))\n"
        "assert outs[0][0] == outs[1][0] == ['scale_shift'], (outs[0][0], outs[1][0])\n"
        "assert outs[0][1].view(torch.int32).equal(outs[1][1].view(torch.int32))\n"
        "print('same')\n"
    )
    libs = [os.path.join(caches[k], "kb_pch_cuda.so") for k in ("1", "0")]
    r = subprocess.run([sys.executable, "-c", probe, *libs], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stdout + r.stderr


def _broken_headers(cache: str) -> HeaderCache:
    """Headers of this host's key that break every compile through them, published as ready."""
    headers = header_cache_for(_cfg(cache))
    os.chmod(cache, 0o711)  # as the build cache makes its root: builds traverse it, never list it
    os.makedirs(os.path.join(headers.include_dir, HEADER + ".gch"))
    with open(os.path.join(headers.include_dir, HEADER), "w") as fh:
        fh.write("#error the host's shared headers are broken\n")
    with open(os.path.join(headers.include_dir, HEADER + ".gch", "default.gch"), "wb") as fh:
        fh.write(b"not a precompiled header")
    return headers


def test_the_proof_rejects_headers_that_fail_in_the_sandbox(tmp_path):
    headers = _broken_headers(str(tmp_path))
    error, _took = prove(headers, 600)
    assert error.startswith("the proof of default failed in the build sandbox") and "broken" in error, error


@pytest.fixture(scope="module")
def broken_build(tmp_path_factory):
    """A kernel built (in a process of its own, headers on) into a cache whose published headers
    break every compile through them; ``two_builds`` starts it to use the core its header build
    leaves, and it runs alone where that fixture is not set up."""
    folder = str(tmp_path_factory.mktemp("kb-pch-broken"))
    env = {"KB_PCH": "1", "KB_PCH_VARIANTS": "default"}
    build = BackgroundBuild(folder, kernel("kb_pch_broken"), env)
    os.makedirs(build.cache)
    with pytest.MonkeyPatch.context() as mp:  # the key of the headers the build will look for
        for name, value in env.items():
            mp.setenv(name, value)
        headers = _broken_headers(build.cache)
    with open(os.path.join(headers.path, MANIFEST), "w") as fh:
        json.dump({"format": "test"}, fh)
    assert headers.ready
    yield build
    build.stop()


def test_a_compile_error_naming_the_headers_is_built_again_without_them(broken_build):
    out = broken_build.result()
    assert out.status == "built", (out.error, out.log[-2000:])
    assert out.headers == "none" and out.headers_why.startswith("a compile through them failed"), out.headers_why
    assert header_cache_for(_cfg(broken_build.cache)).path in out.headers_why
    build = build_dir_for(broken_build.source, _cfg(broken_build.cache))
    assert build.built and build.failure is None  # no verdict from the host's headers, none cached
