"""The pure parts of benchmarks/lean_headers_scan.py: the ``.cu`` command's architecture and output,
the first error line and its group, the scan's counts and the tables. The compiles themselves need
nvcc and the field checkout (the script is run by hand)."""

from __future__ import annotations

from benchmarks.lean_headers_scan import (
    error_group,
    first_error,
    retargeted,
    scan_summary,
    scan_table,
    time_table,
    with_arch,
)

#: A ``.cu`` command as torch 2.13's ``build.ninja`` writes it (shortened).
TORCH_CU = [
    "/usr/local/cuda/bin/nvcc",
    "-DTORCH_EXTENSION_NAME=fused_ops",
    "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90,code=sm_90",
    "--compiler-options",
    "-fPIC",
    "-std=c++20",
    "-c",
    "/w/cuda.cu",
    "-o",
    "cuda.cuda.o",
]


def test_torchs_gencode_flags_become_one_arch_flag_in_their_place():
    both = [*TORCH_CU[:3], "-gencode=arch=compute_90,code=compute_90", *TORCH_CU[3:]]
    for argv in (TORCH_CU, both):
        out = with_arch(argv, "sm_90")
        assert out[3] == "-arch=sm_90"
        assert not any("gencode" in a for a in out)
        assert [a for a in out if a != "-arch=sm_90"] == [a for a in TORCH_CU if "gencode" not in a]


def test_no_arch_keeps_torchs_flags():
    assert with_arch(TORCH_CU, "") == TORCH_CU


def test_a_compile_is_retargeted_and_a_front_end_run_stops_after_cudafe():
    obj = retargeted(TORCH_CU, "lean_1.o")
    assert obj[-2:] == ["-o", "lean_1.o"] and "-c" in obj
    front = retargeted(TORCH_CU, "cudafe.ii", front_end_only=True)
    assert "-c" not in front and front[front.index("--cuda") + 1] == "/w/cuda.cu"
    assert TORCH_CU[-1] == "cuda.cuda.o"  # the command read from ninja is left as it was


def test_the_first_error_line_is_grouped():
    missing = "cuda.cu:7:10: fatal error: cublas_v2.h: No such file or directory\ncompilation terminated.\n"
    assert error_group(first_error(missing)) == "missing cublas_v2.h"
    dispatch = (
        "cuda.cu(59): warning #1: something\n"
        'cuda.cu(59): error: no suitable conversion function from "const at::DeprecatedTypeProperties" to '
        '"c10::ScalarType" exists\ncuda.cu(80): error: identifier "x" is undefined\n'
    )
    assert first_error(dispatch).startswith("cuda.cu(59): error: no suitable")
    assert error_group(first_error(dispatch)) == "type() in AT_DISPATCH"
    assert error_group('cuda.cu(3): error: namespace "torch" has no member "nn"') == "other"
    assert error_group('cuda.cu(2): catastrophic error: cannot open source file "cublas_v2.h"') == (
        "missing cublas_v2.h"
    )
    assert first_error("") == "" and first_error("no such line\n") == "no such line"


def test_the_scan_counts_and_its_table():
    rows = [
        {"source": "a", "rc": 0, "group": ""},
        {"source": "b", "rc": 1, "group": "missing cublas_v2.h"},
        {"source": "c", "rc": 2, "group": "type() in AT_DISPATCH"},
        {"source": "d", "rc": 1, "group": "missing cublas_v2.h"},
    ]
    summary = scan_summary(rows)
    assert (summary["sources"], summary["compiled"], summary["failed"]) == (4, 1, 3)
    assert summary["groups"] == {"missing cublas_v2.h": ["b", "d"], "type() in AT_DISPATCH": ["c"]}
    table = scan_table(summary, not_captured=0)
    assert "| compiled | 1 |" in table and "| failed: missing cublas_v2.h | 2 |" in table
    assert "| **total** | **4** |" in table and "no CUDA source" not in table
    assert "2 field file(s) gave no CUDA source" in scan_table(summary, not_captured=2)


def test_the_time_table_says_whether_the_device_code_agreed():
    records = [
        {"kernel": "k", "headers": "slim", "run": 1, "seconds": 41.8, "cpu_s": 41.5, "rc": 0},
        {"kernel": "k", "headers": "lean", "run": 1, "seconds": 21.9, "cpu_s": 21.9, "rc": 0},
    ]
    table = time_table(records, {"k": True, "j": None})
    assert "| k | slim | 1 | 41.8 | 41.5 | 0 |" in table
    assert "| k | identical |" in table and "| j | not compared (a compile failed) |" in table
