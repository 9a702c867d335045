"""benchmarks/selfcheck_parts.py: which of the 250 problems are left, and the parts' figures."""

from __future__ import annotations

import gzip
import json

from benchmarks import selfcheck_parts


def _kernelbench(root) -> str:
    for level, names in ((1, ["2_B", "10_C", "1_A"]), (2, ["1_D"]), (3, ["1_E"])):
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True)
        for name in names:
            (folder / f"{name}.py").write_text("class Model: pass\n")
    return str(root)


def _row(level: int, problem: str, status: str = "correct", speedup: float = 1.0, interval=(0.99, 1.01)) -> str:
    return json.dumps({"level": level, "problem": problem, "status": status, "speedup": speedup,
                       "speedup_interval": list(interval)})  # fmt: skip


def test_the_problems_left_are_those_without_a_verdict_in_kernelbenchs_order(tmp_path):
    kb = _kernelbench(tmp_path / "kb")
    assert selfcheck_parts.problems(kb) == ["level1/1_A", "level1/2_B", "level1/10_C", "level2/1_D", "level3/1_E"]
    done = tmp_path / "done"
    done.mkdir()
    (done / "part1.jsonl").write_text(_row(1, "1_A") + "\n" + _row(2, "1_D", status="infrastructure_error") + "\n")
    with gzip.open(done / "part2.jsonl.gz", "wt") as fh:
        fh.write(_row(1, "10_C", status="incorrect", speedup=None) + "\n")
    assert selfcheck_parts.remaining(kb, str(done)) == ["level1/2_B", "level2/1_D", "level3/1_E"]


def test_the_summary_counts_the_bound_and_the_cover_and_names_the_rest(tmp_path):
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join([
        _row(1, "1_A", speedup=1.01),
        _row(1, "2_B", speedup=1.05, interval=(0.98, 1.1)),   # outside 2 %, covered
        _row(1, "2_B", speedup=1.04, interval=(1.02, 1.06)),  # measured again: the last counts
        _row(2, "1_D", status="incorrect", speedup=None),
    ]) + "\n")  # fmt: skip
    figures = dict(selfcheck_parts.summary(selfcheck_parts.results([str(part)])))
    assert figures["problems measured"] == "3 of 250" and figures["correct"] == 2
    assert figures["within 2 % of 1.0"] == "1 of 2" and figures["95 % interval covers 1.0"] == "1 of 2"
    assert figures["neither"] == ["level1/2_B 1.040"]


def test_outside_names_the_problems_beyond_2_percent_and_compare_shows_them_beside_the_other_code(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    (before / "part1.jsonl").write_text("\n".join([
        _row(1, "1_A", speedup=1.01), _row(1, "2_B", speedup=1.05), _row(2, "1_D", speedup=0.97),
    ]) + "\n")  # fmt: skip
    (after / "part1.jsonl").write_text(_row(1, "2_B", speedup=1.005) + "\n" + _row(1, "1_A", speedup=1.03) + "\n")
    assert selfcheck_parts.main(["outside", str(before)]) == 0
    assert selfcheck_parts.outside(selfcheck_parts.results(selfcheck_parts.done_files(str(before)))) == [
        "level1/2_B", "level2/1_D"]  # fmt: skip
    lines = selfcheck_parts.compare(selfcheck_parts.results([str(before / "part1.jsonl")]),
                                    selfcheck_parts.results([str(after / "part1.jsonl")]))  # fmt: skip
    assert lines[0] == "2 problems measured by both: within 2 % before 1, after 1"
    assert lines[4:] == ["| level1/1_A | 1.010 (?) | 1.030 (?) |", "| level1/2_B | 1.050 (?) | 1.005 (?) |"]
