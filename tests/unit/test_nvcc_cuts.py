"""The CPU-side parts of the build-phase measurement (benchmarks/gpu/nvcc_cuts.py): reading nvcc's
``--time`` table, finding a load_inline build's commands, and the cuts' argument lists. The
measurement itself runs on a GPU host (benchmarks/gpu/build_phases.sh)."""

from __future__ import annotations

from benchmarks.gpu.nvcc_cuts import CUTS, Cut, apply_cut, ninja_commands, output_of, parse_nvcc_time

HEADER = "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n"
NVCC = [
    "nvcc",
    "--generate-dependencies-with-compile",
    "--dependency-output",
    "cuda.cuda.o.d",
    "-DTORCH_EXTENSION_NAME=fused_ops",
    "-gencode=arch=compute_90,code=compute_90",
    "-gencode=arch=compute_90,code=sm_90",
    "--compiler-options",
    "-fPIC",
    "-std=c++17",
    "-O3",
    "-lineinfo",
    "-c",
    "/w/cuda.cu",
    "-o",
    "cuda.cuda.o",
]


def test_phases_are_read_by_their_column_names_with_or_without_a_trailing_comma():
    rows = (
        "cuda.cu , gcc (preprocessing 4) , cuda.cu , a.ii , , gcc , 1500.0 , ms ,\n"
        "cuda.cu , cicc , a.ii , a.ptx , compute_90 , cicc , 4000 , ms\n"
        "cuda.cu , cudafe++ , b.ii , b.cpp , , cudafe++ , 3000 , ms ,\n"
        "cuda.cu , gcc (compiling) , b.cpp , a.o , , gcc , 2.5 , s ,\n"
    )
    got = parse_nvcc_time(HEADER + rows)
    assert got["groups"] == {"preprocess": 1.5, "cicc": 4.0, "cudafe++": 3.0, "host compile": 2.5}
    assert got["phases"]["gcc (preprocessing 4)"] == 1.5


def test_a_phase_seen_twice_is_summed_and_rows_that_do_not_parse_are_skipped():
    rows = (
        "x.cu , ptxas , a , b , sm_90 , ptxas , 10 , ms\nx.cu , ptxas , a , b , sm_90 , ptxas , 30 , ms\n"
        "x.cu , ptxas , a , b , sm_90 , ptxas , n/a , ms\nshort row\n"
    )
    assert parse_nvcc_time(HEADER + rows)["groups"] == {"ptxas": 0.04}


def test_a_table_without_the_expected_columns_reads_as_nothing():
    assert parse_nvcc_time("a,b\n1,2\n") == {"phases": {}, "groups": {}}
    assert parse_nvcc_time("") == {"phases": {}, "groups": {}}


def test_the_three_commands_of_a_build_are_found_in_ninjas_listing():
    listing = (
        "c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=fused_ops -fPIC -std=c++17 -c /w/main.cpp -o main.o\n"
        "nvcc --generate-dependencies-with-compile --dependency-output cuda.cuda.o.d "
        "--compiler-options '-fPIC' -c /w/cuda.cu -o cuda.cuda.o\n"
        "c++ main.o cuda.cuda.o -shared -L/t/lib -lc10 -o fused_ops.so\n"
    )
    cmds = ninja_commands(listing)
    assert output_of(cmds.main) == "main.o" and output_of(cmds.cu) == "cuda.cuda.o"
    assert output_of(cmds.link) == "fused_ops.so"
    assert "-fPIC" in cmds.cu  # shell quoting undone, as ninja's shell would


def test_the_base_cut_is_the_builds_own_command():
    assert apply_cut(NVCC, Cut("base"), "9.0") == NVCC


def test_arch_only_names_the_devices_sm_once_in_place_of_every_gencode():
    split_form = [*NVCC[:5], "-gencode", "arch=compute_90,code=compute_90", *NVCC[6:]]
    for argv in (NVCC, split_form):
        got = apply_cut(argv, Cut("a", arch_only=True), "9.0+PTX")
        assert [a for a in got if "gencode" in a or "arch=" in a] == ["-gencode=arch=compute_90,code=sm_90"]
        assert got.index("-gencode=arch=compute_90,code=sm_90") == 5


def test_a_host_level_replaces_nvccs_own_and_debug_flags_go():
    got = apply_cut(NVCC, Cut("h", host_opt="-O1", drop_debug=True), "9.0")
    assert "-O3" not in got and got[-1] == "-O1" and "-lineinfo" not in got
    assert apply_cut(NVCC, Cut("t", add=("-t", "0")), "9.0")[-2:] == ["-t", "0"]


def test_every_cut_has_a_distinct_name_and_the_first_is_the_base():
    names = [c.name for c in CUTS]
    assert names[0] == "base" and len(set(names)) == len(names)


def test_a_host_level_passed_through_xcompiler_goes_with_its_option_and_ptxas_levels_stay():
    argv = ["nvcc", "-Xcompiler", "-O3", "-Xptxas", "-O3", "-c", "k.cu", "-o", "k.o"]
    assert apply_cut(argv, Cut("h", host_opt="-O0"), "9.0") == [
        "nvcc",
        "-Xptxas",
        "-O3",
        "-c",
        "k.cu",
        "-o",
        "k.o",
        "-O0",
    ]
