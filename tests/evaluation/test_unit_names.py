"""Keying a C++ wrapper without its module's name (``evaluation.builds.unit_names``): which units share a
compile, and the object renamed for another name. The server's side: tests/evaluation/test_unit_cache.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from evaluation.builds import unit_names
from evaluation.builds.unit_names import ANY_NAME, bind_name, compiled_name, module_name, shared_flags

WRAPPER = '#include <torch/extension.h>\nint f();\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\nm.def("f", &f);\n}\n'
#: A stand-in for pybind11's macro (no torch: milliseconds): the same three symbols, named alike.
STAND_IN = """#define KB_CAT2(a, b) a##b
#define KB_CAT(a, b) KB_CAT2(a, b)
#define PYBIND11_MODULE(name, m) \\
  static int KB_CAT(KB_CAT(pybind11, _init_), name)(int m) { return m + 1; } \\
  extern "C" int KB_CAT(KB_CAT(Py, Init_), name)() { return KB_CAT(KB_CAT(pybind11, _init_), name)(6); } \\
  int kb_unused_##m
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m);
"""
needs_objcopy = pytest.mark.skipif(
    subprocess.run(
        ["sh", "-c", "command -v c++ && command -v objcopy && command -v nm"], capture_output=True
    ).returncode
    != 0,
    reason="needs a C++ compiler, objcopy and nm",
)


@pytest.fixture(autouse=True)
def _pybind11_3(monkeypatch):
    monkeypatch.setattr(unit_names, "spec_named_modules", lambda: True)


def test_a_wrapper_is_keyed_without_its_modules_name():
    flags = ["-O2", "-DTORCH_EXTENSION_NAME=fused_ops", "-fPIC"]
    assert module_name(flags) == "fused_ops"
    assert shared_flags(flags, WRAPPER) == ["-O2", ANY_NAME, "-fPIC"]
    assert shared_flags(["-DTORCH_EXTENSION_NAME=other", "-O2"], WRAPPER)[0] == ANY_NAME


@pytest.mark.parametrize(
    "text",
    [
        WRAPPER + 'const char* kb_name = "" TORCH_EXTENSION_NAME;\n',  # the name used otherwise
        WRAPPER.replace("TORCH_EXTENSION_NAME, m", "kb_fixed, m"),  # no use of it at all
        WRAPPER + 'extern "C" void* PyInit_kb_fixed();\n',  # names pybind11's symbols itself
    ],
)
def test_a_unit_that_uses_the_name_otherwise_keeps_it_in_its_key(text):
    flags = ["-O2", "-DTORCH_EXTENSION_NAME=fused_ops"]
    assert shared_flags(flags, text) == flags


def test_no_single_valid_name_means_no_sharing():
    for flags in (["-O2"], ["-DTORCH_EXTENSION_NAME=a", "-DTORCH_EXTENSION_NAME=b"], ["-DTORCH_EXTENSION_NAME=a-b"]):
        assert module_name(flags) == "" and shared_flags(flags, WRAPPER) == flags


def test_older_pybind11_names_modules_itself_so_nothing_is_shared(monkeypatch):
    monkeypatch.setattr(unit_names, "spec_named_modules", lambda: False)
    flags = ["-DTORCH_EXTENSION_NAME=fused_ops"]
    assert shared_flags(flags, WRAPPER) == flags


def _compiled(tmp_path, name: str) -> bytes:
    src = tmp_path / "main.cpp"
    src.write_text(STAND_IN)
    out = tmp_path / f"{name}.o"
    subprocess.run(["c++", "-O2", f"-DTORCH_EXTENSION_NAME={name}", "-c", str(src), "-o", str(out)], check=True)
    return out.read_bytes()


def _global_symbols(tmp_path, obj: bytes) -> set[str]:
    path = tmp_path / "probe.o"
    path.write_bytes(obj)
    out = subprocess.run(["nm", "-g", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@needs_objcopy
def test_an_object_is_renamed_to_the_name_asked_for(tmp_path):
    first = _compiled(tmp_path, "kb_first")
    assert compiled_name(first) == "kb_first" and bind_name(first, "kb_first") is first
    renamed = bind_name(first, "kb_second_longer_name")
    assert renamed is not None and compiled_name(renamed) == "kb_second_longer_name"
    assert _global_symbols(tmp_path, renamed) == _global_symbols(tmp_path, _compiled(tmp_path, "kb_second_longer_name"))
    assert bind_name(first, "not a name") is None and bind_name(b"not an object", "kb_x") is None


@needs_objcopy
def test_objcopy_runs_under_limits(tmp_path, monkeypatch):
    # objcopy reads an object compiled from a kernel's text outside the sandbox: a stand-in on PATH
    # records the limits it was started under, then runs the real one.
    real = shutil.which("objcopy")
    seen = tmp_path / "limits"
    stand_in = tmp_path / "bin" / "objcopy"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/sh\necho "$(ulimit -v) $(ulimit -t) $(ulimit -c)" > {seen}\nexec {real} "$@"\n')
    stand_in.chmod(0o755)
    first = _compiled(tmp_path, "kb_first")
    monkeypatch.setenv("PATH", f"{stand_in.parent}:{os.environ['PATH']}")
    assert compiled_name(bind_name(first, "kb_limited") or b"") == "kb_limited"
    memory_kib, cpu_s, core = seen.read_text().split()
    assert int(memory_kib) * 1024 == unit_names.OBJCOPY_MEMORY_BYTES
    assert int(cpu_s) == unit_names.OBJCOPY_CPU_S and core == "0"
