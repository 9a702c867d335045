"""The ``.cu`` file's lean or slim torch headers (``evaluation.builds.slim_headers``).

- the stand-in routes by compile: gcc's preprocessor, with the folder in ``CPATH`` before torch's
  ``-isystem`` folders as in a build, gives a CUDA compile ``torch/types.h`` and a C++ one the real
  header (a fake torch include tree: milliseconds, no CUDA needed);
- it is written once and never rewritten while right (ninja's dependency records name it);
- a source the slim header does not compile is built again with the real one (the build process is
  replaced by a stand-in here: nvcc is not on the CPU machines; the GPU test below builds for real);
- the lean wrapper header (the C++ compile's) builds a module that works, with torch's real headers on
  the CPU, and a lean build neither waits for nor uses the precompiled (whole) header;
- on a GPU (skips without CUDA): a CUDA kernel built both ways has the same exported functions and
  bitwise the same outputs, and one that needs torch's C++ frontend in its ``.cu`` is built again
  with the real header.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

from evaluation.builds import slim_headers
from evaluation.builds import stage as build_stage
from evaluation.builds.pch import HeaderCache
from evaluation.builds.stage import build_dir_for, prebuild
from evaluation.results.types import EvaluationConfig
from tests.evaluation.helpers import needs_cuda
from tests.evaluation.test_pch import CUDA_KERNEL as PCH_CUDA_KERNEL

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")


# An operator's header as torch generates it: its own declarations after ATen's heavy includes.
FAKE_OP_HEADER = """#if !defined(TORCH_STABLE_ONLY)
#pragma once
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/{name}_ops.h>
namespace at {{ int op_{name}; }}
#endif
"""


def _fake_torch(root) -> str:
    """A torch include tree whose headers say which of them a compile read (a marker each)."""
    inc = root / "torch_include"
    if inc.exists():
        return str(inc)
    (inc / "torch").mkdir(parents=True)
    (inc / "torch" / "extension.h").write_text("int real_extension_h;\n")
    (inc / "torch" / "types.h").write_text("int types_h_only;\n")
    (inc / "ATen" / "core").mkdir(parents=True)
    (inc / "ATen" / "ops").mkdir()
    (inc / "c10" / "core").mkdir(parents=True)
    (inc / "ATen" / "core" / "Tensor.h").write_text("#pragma once\nint aten_tensor_h;\n")
    (inc / "ATen" / "Context.h").write_text("#pragma once\nint aten_context_h;\n")
    (inc / "c10" / "core" / "Scalar.h").write_text("#pragma once\n")
    (inc / "c10" / "core" / "TensorOptions.h").write_text("#pragma once\n")
    (inc / "ATen" / "Dispatch.h").write_text("int aten_dispatch_h;\n")
    (inc / "ATen" / "TensorOperators.h").write_text("#ifdef AT_PER_OPERATOR_HEADERS\nint aten_operators_h;\n#endif\n")
    (inc / "ATen" / "TensorIndexing.h").write_text("int aten_indexing_h;\n")
    (inc / "torch" / "csrc" / "utils").mkdir(parents=True)
    (inc / "torch" / "csrc" / "utils" / "pybind.h").write_text("#pragma once\nint torch_pybind_h;\n")
    (inc / "torch" / "csrc" / "Exceptions.h").write_text("#pragma once\nint torch_exceptions_h;\n")
    for name in slim_headers.LEAN_OPS:
        (inc / "ATen" / "ops" / f"{name}.h").write_text(FAKE_OP_HEADER.format(name=name))
        (inc / "ATen" / "ops" / f"{name}_ops.h").write_text(f"#pragma once\nint ops_of_{name};\n")
    return str(inc)


@pytest.fixture
def fake_torch_headers(tmp_path, monkeypatch):
    """The lean folder's operator headers are written from this fake torch's (``slim_headers.files``)."""
    monkeypatch.setattr(slim_headers, "torch_include", lambda: _fake_torch(tmp_path))


def _preprocess(tmp_path, cpath: str, *defines: str, header: str = "torch/extension.h") -> str:
    src = tmp_path / "k.cpp"
    src.write_text(f"#include <{header}>\n#include <{header}>\n")
    env = {**os.environ, "CPATH": cpath}
    cmd = ["c++", "-E", "-P", *defines, "-isystem", _fake_torch(tmp_path), str(src)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout


@needs_cxx
def test_slim_gives_a_cuda_compile_types_h_and_a_cpp_compile_the_real_header(tmp_path, monkeypatch, fake_torch_headers):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "1")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    assert folder is not None and os.path.basename(os.path.dirname(folder)).startswith("slim-cu-")
    cuda = _preprocess(tmp_path, folder, "-D__CUDACC__")
    assert "types_h_only" in cuda and "real_extension_h" not in cuda
    cpp = _preprocess(tmp_path, folder)
    assert "real_extension_h" in cpp and "types_h_only" not in cpp


@needs_cxx
def test_lean_gives_a_cuda_compile_the_tensor_and_its_operators_and_nothing_else_of_torch(
    tmp_path, monkeypatch, fake_torch_headers
):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    assert folder is not None and os.path.basename(os.path.dirname(folder)).startswith("lean-cu-")
    for header in ("torch/extension.h", "torch/types.h"):  # the source's include, and load_inline's
        cuda = _preprocess(tmp_path, folder, "-D__CUDACC__", header=header)
        marks = ("aten_tensor_h", "aten_dispatch_h", "aten_operators_h", "op_zeros_like", "ops_of_zeros_like")
        assert all(m in cuda for m in marks), header
        assert all(f"int op_{name};" in cuda for name in slim_headers.LEAN_OPS), header
        # Neither ATen's context (every operator header's first include) nor the indexing (c10::List).
        assert "aten_context_h" not in cuda and "aten_indexing_h" not in cuda, header
        assert "types_h_only" not in cuda and "real_extension_h" not in cuda, header
        assert "constexpr auto kFloat32 = at::kFloat;" in cuda and cuda.count("namespace torch {") == 1, header
    cpp = _preprocess(tmp_path, folder, header="torch/types.h")
    assert "types_h_only" in cpp and "aten_tensor_h" not in cpp and "namespace torch" not in cpp
    # The wrapper (a C++ compile of torch/extension.h): the Tensor and the Python bindings, once.
    cpp = _preprocess(tmp_path, folder)
    assert all(m in cpp for m in ("aten_tensor_h", "torch_pybind_h", "torch_exceptions_h")), cpp
    assert "real_extension_h" not in cpp and "types_h_only" not in cpp and "aten_dispatch_h" not in cpp
    assert cpp.count("namespace torch {") == 1 and "constexpr auto kFloat32 = at::kFloat;" in cpp
    # Any other compile that includes an operator's header gets torch's, whole.
    cpp = _preprocess(tmp_path, folder, header="ATen/ops/zeros.h")
    assert "aten_context_h" in cpp and "op_zeros" in cpp


def test_the_lean_folder_is_named_by_its_text_so_another_torch_gets_another(tmp_path, monkeypatch, fake_torch_headers):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    cache = str(tmp_path / "cache")
    first = slim_headers.ensure(cache)
    zeros = os.path.join(_fake_torch(tmp_path), "ATen", "ops", "zeros.h")
    with open(zeros, "a") as fh:
        fh.write("namespace at { int zeros_of_a_newer_torch; }\n")
    slim_headers.forget()
    try:
        second = slim_headers.ensure(cache)
    finally:
        slim_headers.forget()
    assert second != first and os.path.isdir(first)  # the old folder stays: entries built with it name it
    with open(os.path.join(second, "ATen", "ops", "zeros.h")) as fh:
        assert "zeros_of_a_newer_torch" in fh.read()


def test_the_headers_are_written_once_and_mended_when_wrong(tmp_path, monkeypatch, fake_torch_headers):
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    cache = str(tmp_path / "cache")
    folder = slim_headers.ensure(cache)
    assert sorted(os.listdir(os.path.join(folder, "torch"))) == ["extension.h", "types.h"]
    assert sorted(os.listdir(os.path.join(folder, "ATen", "ops"))) == sorted(f"{n}.h" for n in slim_headers.LEAN_OPS)
    path = os.path.join(folder, "torch", "types.h")
    assert os.stat(path).st_mode & 0o777 == 0o644
    os.utime(path, (1_000_000, 1_000_000))
    assert slim_headers.ensure(cache) == folder
    assert os.stat(path).st_mtime == 1_000_000  # untouched: entries built with it stay up to date
    with open(path, "w") as fh:
        fh.write("#error broken\n")
    slim_headers.ensure(cache)
    with open(path) as fh:
        assert fh.read() == slim_headers.LEAN_TYPES_TEXT
    assert sorted(os.listdir(os.path.dirname(path))) == ["extension.h", "types.h"]


LEAN_CU = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
template <typename T> __global__ void halve(const T* x, T* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / T(2);
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::zeros_like(x);
    auto z = torch::empty({x.size(0)}, x.options().dtype(torch::kFloat32));
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "halve", [&] {
        halve<scalar_t><<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel());
    });
    return (y / 2 + z.mean()).contiguous();
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA's compiler; no GPU needed)")
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "body, compiles", [("", True), ("torch::Tensor first(torch::Tensor x) { return x.index({0}); }", False)]
)
def test_nvcc_compiles_a_cu_file_lean_with_torchs_real_headers(tmp_path, monkeypatch, body, compiles):
    """The light operator headers are torch's own functions: nvcc's front ends (cudafe++ and cicc,
    ``--cuda``) take a field-like ``.cu`` through them; the indexing is not in the lean folder."""
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    assert folder is not None and os.path.isfile(os.path.join(folder, "ATen", "ops", "zeros_like.h"))
    cu = tmp_path / "k.cu"
    cu.write_text("#include <torch/types.h>\n" + LEAN_CU + body)  # load_inline's first line, then the source
    includes = [arg for path in cpp_extension.include_paths() for arg in ("-isystem", path)]
    cmd = [
        "nvcc",
        "--cuda",
        "-std=c++17",
        "-arch=sm_90",
        "--expt-relaxed-constexpr",
        *includes,
        str(cu),
        "-o",
        str(tmp_path / "k.ii"),
    ]
    r = subprocess.run(cmd, env={**os.environ, "CPATH": folder}, capture_output=True, text=True, timeout=280)
    assert (r.returncode == 0) == compiles, r.stderr[-3000:]


# The wrapper load_inline writes (main.cpp) when the cpp_sources declare the .cu file's functions.
WRAPPER = """#include <torch/extension.h>
#include <torch/extension.h>
BODY
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
m.def("add_one", torch::wrap_pybind_function(add_one), "add_one");
}
"""


@needs_cxx
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "body, compiles",
    [
        ("torch::Tensor add_one(torch::Tensor x);", True),
        ("torch::Tensor add_one(torch::Tensor x) { return torch::nn::functional::relu(x); }", False),
    ],
)
def test_gcc_compiles_the_wrapper_lean_with_torchs_real_headers(tmp_path, monkeypatch, body, compiles):
    """The lean wrapper header is enough for a wrapper of declarations; torch's C++ frontend is not in it
    (such a source is built again with the real header)."""
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    src = tmp_path / "main.cpp"
    src.write_text(WRAPPER.replace("BODY", body))
    includes = [arg for path in [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
                for arg in ("-isystem", path)]  # fmt: skip
    cmd = ["c++", "-fsyntax-only", "-std=c++17", "-DTORCH_EXTENSION_NAME=kb_lean", *includes, str(src)]
    r = subprocess.run(cmd, env={**os.environ, "CPATH": folder}, capture_output=True, text=True, timeout=280)
    assert (r.returncode == 0) == compiles, r.stderr[-3000:]


def _headers_read(tmp_path, text: str, cpath: str) -> set[str]:
    """Every header gcc opens for a C++ file of ``text`` (``-H``), with torch's real include paths."""
    import torch.utils.cpp_extension as cpp_extension

    src = tmp_path / "h.cpp"
    src.write_text(text)
    includes = [arg for path in [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
                for arg in ("-isystem", path)]  # fmt: skip
    cmd = ["c++", "-E", "-H", "-std=c++17", *includes, str(src), "-o", os.devnull]
    r = subprocess.run(cmd, env={**os.environ, "CPATH": cpath}, capture_output=True, text=True, timeout=280)
    assert r.returncode == 0, r.stderr[-3000:]
    return {ln.split(" ", 1)[1] for ln in r.stderr.splitlines() if ln.startswith(".") and " " in ln}


@needs_cxx
@pytest.mark.timeout(300)
def test_what_the_lean_wrapper_leaves_out_binds_nothing(tmp_path, monkeypatch):
    """A wrapper that compiles lean binds its functions as with torch's header: of what torch's header
    reads and the lean one does not, no file declares a pybind11 type caster, holder or opaque type
    (one would make a bound function convert its arguments otherwise, and fail only when called)."""
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    full = _headers_read(tmp_path, "#include <torch/extension.h>\n", "")
    lean = _headers_read(tmp_path, "#include <torch/extension.h>\n", folder)
    assert any(p.endswith("pybind11/pybind11.h") for p in lean) and len(full - lean) > 1000
    binding = re.compile(
        r"^(?!\s*//).*(type_caster|PYBIND11_DECLARE_HOLDER_TYPE|PYBIND11_MAKE_OPAQUE|polymorphic_type_hook"
        r"|pybind11::detail|namespace pybind11)",
        re.M,
    )
    left_out = sorted(p for p in full - lean if binding.search(open(p, encoding="utf-8", errors="replace").read()))
    assert left_out == [], left_out


LEAN_WRAPPER_BUILD = """
import sys, torch
from torch.utils.cpp_extension import load_inline
m = load_inline(name="kb_lean_wrapper", cpp_sources="torch::Tensor add_one(torch::Tensor x) { return x.add(1); }",
                functions=["add_one"], build_directory=sys.argv[1], extra_cflags=["-H"], verbose=True)
x = torch.arange(6.0)
assert m.add_one(x).equal(x + 1)
print("answered")
"""


@needs_cxx
@pytest.mark.timeout(300)
def test_a_wrapper_built_lean_is_a_working_module(tmp_path, monkeypatch):
    """load_inline's own build of a wrapper with the lean folder in ``CPATH`` (as a lean build's), on the
    CPU: the module imports and its function answers; gcc read the lean header, not torch's frontend."""
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "2")
    folder = slim_headers.ensure(str(tmp_path / "cache"))
    build = tmp_path / "build"
    build.mkdir()
    env = {**os.environ, "CPATH": folder, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    r = subprocess.run([sys.executable, "-c", LEAN_WRAPPER_BUILD, str(build)], env=env, capture_output=True,
                       text=True, timeout=280)  # fmt: skip
    assert r.returncode == 0 and "answered" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
    read = r.stdout + r.stderr  # gcc's -H: every header it opened, one dot per level of inclusion
    assert f"\n. {os.path.join(folder, 'torch', 'extension.h')}\n" in read, read[:2000]
    assert "torch/all.h" not in read and "torch/nn/" not in read


def test_only_cuda_builds_get_it(monkeypatch):
    assert slim_headers.enabled("cuda") and not slim_headers.enabled("cpu")
    assert slim_headers.level() == "lean"
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "1")
    assert slim_headers.level() == "slim" and slim_headers.enabled("cuda")
    monkeypatch.setenv("KB_SLIM_CU_HEADERS", "0")
    assert not slim_headers.enabled("cuda")


NEEDS_BUILD = "from torch.utils.cpp_extension import load_inline  # a build\nclass ModelNew: pass\n"


def _fake_build_process(calls: list[dict], fails_slim: bool):
    """Stands in for the sandboxed build (nvcc is not on the CPU machines); records its CPATH."""

    def run(build, kernel_source, cfg, deadline, out, slim_cu=False):
        cpath = build_stage.process_env(cfg, out, slim_cu).get("CPATH", "")
        calls.append({"slim": slim_cu, "cpath": cpath, "private": build.private, "headers": out.headers})
        if slim_cu and fails_slim:
            return {"ok": False, "kind": "compile_error", "error": "'functional' is not a member of 'torch::nn'"}
        return {"ok": True}

    return run


@pytest.mark.parametrize("fails_slim", [False, True])
def test_a_source_the_slim_header_fails_is_built_again_with_the_real_one(tmp_path, monkeypatch, fails_slim):
    calls: list[dict] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, fails_slim))
    monkeypatch.setenv("KB_PCH", "0")
    cfg = EvaluationConfig(device="cuda", cuda_arch="9.0", build_cache_dir=str(tmp_path / "cache"))
    out = prebuild(NEEDS_BUILD, cfg)
    assert out.status == "built" and out.error is None
    assert [c["slim"] for c in calls] == ([True, False] if fails_slim else [True])
    assert slim_headers.include_dir(cfg.build_cache_dir) in calls[0]["cpath"]
    assert out.cu_headers == ("full" if fails_slim else "lean")
    if fails_slim:
        assert calls[1]["cpath"] == "" and calls[1]["private"] != calls[0]["private"]
        assert not os.path.exists(calls[0]["private"])  # the slim try's folder is gone
    assert build_dir_for(NEEDS_BUILD, cfg).built


@pytest.mark.parametrize("made", [True, False])
def test_a_lean_build_waits_for_no_precompiled_header_and_its_retry_takes_them_if_made(tmp_path, monkeypatch, made):
    """The precompiled header is torch's whole one: in the lean try it would stand in for the lean
    wrapper header, so that try has none and does not wait for them; the retry with the real headers
    uses them if they are made, else asks for them (for later builds) and goes on without."""
    calls: list[dict] = []
    asked: list[float] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, fails_slim=True))
    monkeypatch.setenv("KB_PCH", "1")
    monkeypatch.setattr(HeaderCache, "ready", property(lambda self: made))
    monkeypatch.setattr(HeaderCache, "ensure", lambda self, wait_s=0.0: asked.append(wait_s) or made)
    cfg = EvaluationConfig(device="cuda", cuda_arch="9.0", build_cache_dir=str(tmp_path / "cache"))
    with build_stage.BuildPool(1, cfg):
        assert asked == []  # nothing made ahead: most builds never need them
    out = prebuild(NEEDS_BUILD, cfg)
    assert out.status == "built" and out.cu_headers == "full"
    assert calls[0]["cpath"] == slim_headers.include_dir(cfg.build_cache_dir) and calls[0]["headers"] == "lean"
    pch = build_stage.header_cache_for(cfg).include_dir
    assert calls[1]["cpath"] == (pch if made else "") and "-cu-" not in calls[1]["cpath"]
    if made:
        assert out.headers == "shared" and asked == []
    else:
        assert (out.headers, asked) == ("none", [0.0]) and out.headers_why.startswith("not made yet")


def test_a_lean_build_whose_folder_cannot_be_written_is_built_full_and_says_which_headers(tmp_path, monkeypatch):
    calls: list[dict] = []
    asked: list[float] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, fails_slim=False))
    monkeypatch.setattr(build_stage, "slim_folder", lambda cache_root: None)
    monkeypatch.setenv("KB_PCH", "1")
    monkeypatch.setattr(HeaderCache, "ready", property(lambda self: False))
    monkeypatch.setattr(HeaderCache, "ensure", lambda self, wait_s=0.0: asked.append(wait_s) or False)
    cfg = EvaluationConfig(device="cuda", cuda_arch="9.0", build_cache_dir=str(tmp_path / "cache"))
    out = prebuild(NEEDS_BUILD, cfg)
    assert out.status == "built" and [c["slim"] for c in calls] == [False] and out.cu_headers == "full"
    assert (out.headers, asked) == ("none", [0.0]) and out.headers_why.startswith("not made yet")


def test_a_cpu_build_never_gets_it(tmp_path, monkeypatch):
    calls: list[dict] = []
    monkeypatch.setattr(build_stage, "_run_build_process", _fake_build_process(calls, True))
    cfg = EvaluationConfig(device="cpu", build_cache_dir=str(tmp_path / "cache"))
    out = prebuild(NEEDS_BUILD, cfg)
    assert [c["slim"] for c in calls] == [False] and out.cu_headers == ""


# test_pch's CUDA kernel (its .cu includes torch/extension.h), named per test, with a hook on its result.
CUDA_KERNEL = PCH_CUDA_KERNEL.replace('"kb_pch_cuda"', '"NAME"').replace("return out;", "return EXTRA(out);")
assert '"NAME"' in CUDA_KERNEL and "EXTRA(out)" in CUDA_KERNEL
PLAIN = CUDA_KERNEL.replace("EXTRA(out)", "out")
# torch::nn::functional is torch's C++ frontend: in torch/extension.h, not in torch/types.h.
NEEDS_FRONTEND = CUDA_KERNEL.replace("EXTRA(out)", "torch::nn::functional::relu(out)")

PROBE = """
import importlib.util, sys, torch
outs = []
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location('kb_slim_cuda', path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(7)).cuda()
    outs.append((sorted(n for n in dir(m) if not n.startswith('__')), m.scale_shift(x, 1.5).cpu()))
for names, out in outs:
    assert names == ['scale_shift'], names
    assert out.view(torch.int32).equal(outs[0][1].view(torch.int32))
print('same')
"""


def _built(source: str, cfg: EvaluationConfig) -> tuple[build_stage.BuildOutcome, str]:
    out = prebuild(source, cfg)
    assert out.status == "built", (out.error, out.log[-3000:])
    (ext,) = glob.glob(os.path.join(build_dir_for(source, cfg).path or "", "torch_extensions", "*"))
    return out, ext


@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_cuda_kernel_built_both_ways_is_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")  # no precompiled wrapper header: lean's wrapper is lean, the others torch's
    libs, cu_s = [], {}
    for slim, headers in (("2", "lean"), ("1", "slim"), ("0", "full")):
        monkeypatch.setenv("KB_SLIM_CU_HEADERS", slim)
        cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path / f"slim{slim}"), timeout_s=9000)
        out, ext = _built(PLAIN.replace("NAME", "kb_slim_cuda"), cfg)
        assert out.cu_headers == headers
        cu_s[headers] = [s for k, s in out.steps_s.items() if k.endswith(".cuda.o")]
        libs.append(os.path.join(ext, "kb_slim_cuda.so"))
    print(f"the .cu file's compile (s): {cu_s}")
    r = subprocess.run([sys.executable, "-c", PROBE, *libs], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "same", r.stdout + r.stderr


@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_cu_file_that_needs_the_frontend_is_built_with_the_real_header(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_PCH", "0")
    cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path / "cache"), timeout_s=9000)
    out, _ext = _built(NEEDS_FRONTEND.replace("NAME", "kb_slim_frontend"), cfg)
    assert out.cu_headers == "full"
