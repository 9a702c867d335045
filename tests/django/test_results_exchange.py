"""Results that travel without code (issue 26.6): export_results and import_results round trip."""

import datetime as dt
import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from leaderboard.ingest.results_exchange import read_jsonl
from leaderboard.models import Evaluation, Kernel, LanguageModel, Run
from problems.models import Hardware, Problem, ProblemSet, ScoringRules
from tests.sources import PROBLEM_SOURCE

pytestmark = pytest.mark.django_db
KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b  # secret-kernel-text\n"
WHEN = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
# The sandbox's uids, hidden paths and cache paths stay private (leaderboard.reads.disclosure).
PRIVATE_ENVIRONMENT = {
    "torch": "2.8",
    "device_name": "NVIDIA H200",
    "harness": "0123456789ab",
    "harness_commit": "e586974",
    "uid": 213847,
    "reference_uid": 213846,
    "hidden_paths": ["/home", "/srv/secret-checkout"],
    "kernel_confinement": {"uid": 213847},
    "build_cache": "/var/cache/kb-build-7f3a",
}


def world() -> tuple[Kernel, Hardware]:
    rules = ScoringRules.objects.for_version("v0")
    problem_set = ProblemSet.objects.create(slug="kb-lb", name="Leaderboard", rules=rules)
    problem = Problem.objects.create(problem_set=problem_set, level=1, number=12, name="Diag", source=PROBLEM_SOURCE)
    hardware = Hardware.objects.create(slug="h200", name="NVIDIA H200", device_name="NVIDIA H200", cuda_version="12.8")
    run = Run.objects.create(
        model=LanguageModel.objects.create(name="o1-preview"), problem_set=problem_set, hardware=hardware
    )
    return Kernel.objects.create(run=run, problem=problem, source=KERNEL), hardware


def measured(kernel: Kernel, hardware: Hardware, **values) -> Evaluation:
    base = {
        "state": "done", "status": "correct", "compiled": True, "correct": True, "speedup": 1.25, "speedup_low": 1.2,
        "speedup_high": 1.3, "kernel_ms": 0.8, "reference_ms": 1.0, "trials_passed": 5, "trials_total": 5,
        "flags": [{"code": "suspicious_speedup", "message": "x"}], "environment": PRIVATE_ENVIRONMENT,
        "error": "secret error text", "log": "secret log", "worker_name": "gpu-host-7", "finished_at": WHEN,
        "started_at": WHEN - dt.timedelta(seconds=30), "rules": kernel.run.rules,
    }  # fmt: skip
    return Evaluation.objects.create(kernel=kernel, hardware=hardware, **{**base, **values})


def export(path, *args) -> str:
    out = io.StringIO()
    call_command("export_results", "--out", str(path), *args, stdout=out)
    return out.getvalue()


def load(path, *args) -> str:
    out = io.StringIO()
    call_command("import_results", str(path), *args, stdout=out)
    return out.getvalue()


def test_results_round_trip_without_code_and_a_second_import_changes_nothing(tmp_path):
    kernel, hardware = world()
    first = measured(kernel, hardware)
    measured(kernel, hardware, status="incorrect", correct=False, speedup=None, speedup_low=None, speedup_high=None,
             finished_at=WHEN + dt.timedelta(hours=1))  # fmt: skip
    path = tmp_path / "h200_results.jsonl"
    assert "wrote 2 evaluation(s)" in export(path, "--hardware", "h200")
    text = path.read_text()
    for secret in (
        "secret-kernel-text",
        "ModelNew",
        "torch.matmul",
        "secret error text",
        "secret log",
        "gpu-host-7",
        "uid",
        "213847",
        "secret-checkout",
        "kb-build",
    ):
        assert secret not in text  # figures and the public environment only
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["format"] == "kernelbench-results/1" and len(lines) == 3
    assert lines[1]["kernel"] == {
        "source_hash": kernel.source_hash, "problem_set": "kb-lb", "level": 1, "problem": 12,
        "problem_hash": kernel.problem.source_hash, "model": "o1-preview", "sample": 0,
    }  # fmt: skip
    assert lines[1]["hardware"]["slug"] == "h200" and lines[1]["rules"]["slug"] == "kernelbench-v0"

    Evaluation.objects.all().delete()  # a fresh instance: the same kernel, none of its evaluations
    assert "2 evaluation(s) stored on 1 kernel(s)" in load(path)
    back = Evaluation.objects.get(status="correct")
    for name in ("speedup", "speedup_low", "speedup_high", "kernel_ms", "reference_ms", "flags",
                 "trials_passed", "finished_at", "started_at", "origin", "rules_id", "hardware_id"):  # fmt: skip
        assert getattr(back, name) == getattr(first, name), name
    # Which code measured it travels with the figures.
    assert back.environment == {
        "torch": "2.8",
        "device_name": "NVIDIA H200",
        "harness": "0123456789ab",
        "harness_commit": "e586974",
    }
    assert back.error == "" and back.log == "" and back.worker_name == ""
    kernel.refresh_from_db()
    assert kernel.latest_evaluation.finished_at == WHEN + dt.timedelta(hours=1)  # the newest, as the worker picks

    assert "0 evaluation(s) stored on 0 kernel(s); 2 already stored" in load(path)
    assert Evaluation.objects.count() == 2


def test_a_record_twice_in_one_file_is_stored_once_and_lines_cost_no_lookups_of_their_own(
    tmp_path, django_assert_max_num_queries
):
    """What a file's lines share (their rules, what is stored already) is looked up once a file, not
    once a line: the field's 573 results took about 13 queries a line."""
    kernel, hardware = world()
    for hours in range(30):
        measured(kernel, hardware, finished_at=WHEN + dt.timedelta(hours=hours))
    path = tmp_path / "r.jsonl"
    export(path, "--hardware", "h200")
    header, *lines = path.read_text().splitlines()
    Evaluation.objects.all().delete()
    path.write_text("\n".join([header, *lines, lines[0]]) + "\n")  # the first record again at the end
    assert "30 evaluation(s) stored on 1 kernel(s); 1 already stored" in load(path)
    assert Evaluation.objects.count() == 30
    with django_assert_max_num_queries(12):  # a second import: nothing to store, no query a line
        assert "0 evaluation(s) stored on 0 kernel(s); 31 already stored" in load(path)


def test_import_never_creates_kernels_and_attaches_only_by_hash_and_problem(tmp_path):
    kernel, hardware = world()
    measured(kernel, hardware)
    path = tmp_path / "r.jsonl"
    export(path)
    Evaluation.objects.all().delete()
    Kernel.objects.all().delete()
    other = Kernel.objects.create(run=Run.objects.get(), problem=Problem.objects.get(), source=KERNEL + "# changed\n")
    out = load(path)
    assert "0 evaluation(s) stored on 0 kernel(s); 1 skipped: no kernel with that source hash and problem here" in out
    assert Kernel.objects.count() == 1 and not other.evaluations.exists()


def test_a_missing_or_foreign_file(tmp_path):
    assert "nothing imported" in load(tmp_path / "absent.jsonl", "--missing-ok")
    with pytest.raises(CommandError, match="no file"):
        load(tmp_path / "absent.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "something else"}\n')
    with pytest.raises(CommandError, match="not a results file"):
        load(bad)


def test_seed_demo_loads_the_results_file_when_there_is_one(tmp_path, settings, monkeypatch):
    from leaderboard import demo  # deferred: the module reads BASE_DIR paths the test points elsewhere

    kernel, hardware = world()
    measured(kernel, hardware)
    path = tmp_path / "h200_results.jsonl"
    export(path)
    Evaluation.objects.all().delete()
    monkeypatch.setattr(demo, "FIELD_FIGURES", tmp_path / "no-figures.json")
    card, files = demo.field_results_files(tmp_path)
    assert (card, files) == ("h200", [path])  # no second pass yet
    assert demo.seed_field(hardware, files) == {"field_kernels": 0, "field_results": 1}
    assert demo.seed_field(hardware, []) == {"field_kernels": 0, "field_results": 0}


def test_the_field_is_stored_on_the_card_its_results_files_name(tmp_path):
    from leaderboard import demo

    assert demo.field_results_files(tmp_path) == ("h200", [])  # none yet: the field's runs stay where they were
    for name in ("h100_results_pass2.jsonl", "h100_results.jsonl"):
        (tmp_path / name).write_text("")
    assert demo.field_results_files(tmp_path) == (
        "h100",
        [tmp_path / "h100_results.jsonl", tmp_path / "h100_results_pass2.jsonl"],
    )
    assert demo.gpu_hardware("h100").name == "NVIDIA H100"
    (tmp_path / "h200_results.jsonl").write_text("")
    with pytest.raises(ValueError, match="2 cards"):
        demo.field_results_files(tmp_path)


def exported_with(tmp_path, figure: str, value) -> Path:
    """A results file of one measured evaluation whose `figure` is changed to `value`, with the
    evaluation gone from the database (so an import would store it again)."""
    kernel, hardware = world()
    measured(kernel, hardware)
    path = tmp_path / "r.jsonl"
    export(path)
    Evaluation.objects.all().delete()
    header, line = path.read_text().splitlines()
    item = json.loads(line)
    item["evaluation"][figure] = value
    path.write_text(header + "\n" + json.dumps(item) + "\n")
    return path


@pytest.mark.parametrize(
    ("figure", "value", "message"),
    [
        ("kernel_ms", 4e-320, "line 2: kernel_ms 4e-320 ms is under the physical floor"),
        ("reference_ms", 1e-9, "line 2: reference_ms 1e-09 ms is under the physical floor"),
        ("speedup", 2e300, "line 2: speedup 2e\\+300 is over the ceiling"),
        ("speedup_high", 1e7, "line 2: speedup_high 1e\\+07 is over the ceiling"),
    ],
)
def test_a_figure_under_the_floor_or_over_the_ceiling_is_refused_by_line(tmp_path, figure, value, message):
    """Issue 28, case 1: import_results applies the floor and ceiling of every other way in."""
    path = exported_with(tmp_path, figure, value)
    with pytest.raises(CommandError, match=message):
        load(path)
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize(
    ("figure", "value", "message"),
    [
        ("flags", "impossible_speed", "flags must be a list"),
        ("flags", [{"code": "x"}], "flags must be a list"),
        ("flags", [{"code": "<b>X</b>", "message": "m"}], "flags must be a list"),
        ("notes", [{"code": "n", "message": "m" * 4001}], "notes must be a list"),
        ("notes", [{"code": "n", "message": "m"}] * 51, "notes must be a list"),
        ("notes", [{"code": "n", "message": "m", "extra": 1}], "notes must be a list"),
        ("environment", ["torch"], "environment must be an object"),
        ("environment", {"note": "x" * 20_000}, "environment must be an object"),
    ],
)
def test_flags_notes_and_environment_of_another_shape_or_size_are_refused_by_line(tmp_path, figure, value, message):
    path = exported_with(tmp_path, figure, value)
    with pytest.raises(CommandError, match=f"line 2: {message}"):
        load(path)
    assert not Evaluation.objects.exists()


# ---------------------------------------------------------------------------------------------
# as strict as the API: what a hostile results file tried


def exported_line(tmp_path) -> tuple[Path, str, dict]:
    """A results file of one measured evaluation (gone from the database): its path, header and record."""
    kernel, hardware = world()
    measured(kernel, hardware)
    path = tmp_path / "r.jsonl"
    export(path)
    Evaluation.objects.all().delete()
    header, line = path.read_text().splitlines()
    return path, header, json.loads(line)


def test_a_duplicate_key_is_refused_never_read_as_the_last(tmp_path):
    path, header, item = exported_line(tmp_path)
    line = json.dumps(item).replace('"speedup": 1.25', '"speedup": 1.25, "speedup": 9.5', 1)
    assert line.count('"speedup":') == 2
    path.write_text(f"{header}\n{line}\n")
    with pytest.raises(CommandError, match="line 2: not strict JSON: duplicate key.*'speedup'"):
        load(path)
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"speedup": 9.5, "speedup_high": 9.6}, r"speedup 9.5 is not its own times' ratio \(reference_ms / kernel_ms"),
        ({"speedup": 1.6, "speedup_high": 1.7, "kernel_timing": {"iqm": 0.8, "median": 0.8},
          "reference_timing": {"iqm": 1.0, "median": 1.0}}, r"speedup 1.6 is not its own times' ratio \(reference_timing.iqm / kernel_timing.iqm is 1.25"),
        ({"kernel_ms": None, "reference_ms": None}, "a speedup without the reference and kernel times"),
        ({"speedup_low": 1.3, "speedup_high": 1.2}, "speedup_low 1.3 is above speedup_high 1.2"),
        ({"speedup_low": 5e-310}, "speedup_low 5e-310 is a denormal number"),
        ({"max_abs_diff": 1e-320}, "max_abs_diff 1e-320 is not a finite, normal number"),
        ({"max_rel_diff": -1.0}, "max_rel_diff -1.0 is not a finite, normal number"),
        ({"trials_passed": 10**30}, r"evaluation.trials_passed \(10000000000000000000...\) is out of range"),
        ({"trials_total": 2**31}, "trials_passed and trials_total must be whole numbers"),
        ({"trials_total": True}, "trials_passed and trials_total must be whole numbers"),
        ({"environment": {"torch": 10**19}}, r"evaluation.environment.torch .* is out of range"),
        ({"finished_at": "9999-12-31T23:59:59+00:00"}, "finished_at '9999-12-31T23:59:59\\+00:00' is before 2024 or in the future"),
        ({"finished_at": "1970-01-01T00:00:00+00:00"}, "finished_at .* is before 2024 or in the future"),
        ({"finished_at": "2026-13-45T00:00:00+00:00"}, "finished_at must be an ISO date and time with its zone"),
        ({"finished_at": "2026-11-30T00:00:00"}, "finished_at must be an ISO date and time with its zone"),
        ({"started_at": "2026-12-01T13:00:00+00:00"}, "started_at is after finished_at"),
        ({"queued_at": 5}, "queued_at must be an ISO date and time"),
    ],
)  # fmt: skip
def test_a_figure_that_disagrees_with_itself_or_cannot_be_stored_is_a_named_refusal(tmp_path, changes, message):
    path, header, item = exported_line(tmp_path)
    item["evaluation"].update(changes)
    path.write_text(f"{header}\n{json.dumps(item)}\n")
    with pytest.raises(CommandError, match=f"nothing imported: line 2: {message}"):
        load(path)
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize(
    ("part", "changes", "message"),
    [
        ("kernel", {"level": 10**30}, r"kernel.level \(10000000000000000000...\) is out of range"),
        ("kernel", {"level": 9}, "kernel.problem_set must be text and kernel.level 1 to 4"),
        ("kernel", {"problem": -1}, "kernel.problem and kernel.sample must be whole numbers"),
        ("kernel", {"sample": 2**40}, "kernel.problem and kernel.sample must be whole numbers"),
        ("kernel", {"source_hash": "x" * 64}, "kernel.source_hash must be a sha256"),
        ("hardware", {"slug": "h200\x1b[2J"}, "hardware.slug must be a slug"),
        ("hardware", {"name": "H200\x1b]0;owned\x07"}, "hardware.name must be one line of text"),
    ],
)
def test_a_key_out_of_range_or_of_another_shape_is_a_named_refusal(tmp_path, part, changes, message):
    path, header, item = exported_line(tmp_path)
    item[part].update(changes)
    path.write_text(f"{header}\n{json.dumps(item)}\n")
    with pytest.raises(CommandError, match=f"nothing imported: line 2: {message}"):
        load(path)
    assert not Evaluation.objects.exists() and not Hardware.objects.filter(slug__startswith="h200\x1b").exists()


def test_every_wrong_line_is_named_and_nothing_is_imported(tmp_path):
    path, header, item = exported_line(tmp_path)
    good = json.dumps(item)
    item["evaluation"]["speedup"] = 9.5
    wrong = json.dumps(item)
    path.write_text("\n".join([header, good, wrong, "{not json", good.replace("}", ', "a": NaN}', 1)]) + "\n")
    with pytest.raises(CommandError) as refused:
        load(path)
    text = str(refused.value)
    assert "line 3: speedup 9.5" in text and "line 4: not JSON" in text and "line 5: not strict JSON: NaN" in text
    assert "line 2" not in text and not Evaluation.objects.exists()


def test_a_measured_speedup_from_the_interquartile_means_round_trips(tmp_path):
    """The worker's speedup is the ratio of the rounds' interquartile means, which the medians may
    miss by more than the medians' tolerance: the timings it stores say so, and the record imports."""
    kernel, hardware = world()
    measured(kernel, hardware, speedup=1.6, speedup_low=1.5, speedup_high=1.7, kernel_ms=0.6, reference_ms=1.2,
             kernel_timing={"median": 0.6, "iqm": 0.625}, reference_timing={"median": 1.2, "iqm": 1.0})  # fmt: skip
    path = tmp_path / "r.jsonl"
    export(path)
    Evaluation.objects.all().delete()
    assert "1 evaluation(s) stored" in load(path)


def test_each_line_names_the_timing_method_of_the_hardware_that_measured_it(tmp_path):
    kernel, gpu = world()
    cpu = Hardware.objects.create(slug="cpu", name="CPU", kind=Hardware.Kind.CPU)
    measured(kernel, gpu)
    measured(kernel, cpu, finished_at=WHEN + dt.timedelta(hours=1))
    path = tmp_path / "results.jsonl"
    export(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert {line["hardware"]["slug"]: line["rules"]["timing_method"] for line in lines} == {
        "h200": "cuda_event",
        "cpu": "cpu_clock",
    }


FIELD = Path(__file__).resolve().parents[2] / "data" / "field"


COMMITTED_FIELD_RESULTS = sorted(path.name for path in FIELD.glob("h[0-9]00_results*.jsonl"))


def test_the_field_results_are_committed():
    assert COMMITTED_FIELD_RESULTS, f"no <card>_results*.jsonl in {FIELD}"


@pytest.mark.parametrize("name", COMMITTED_FIELD_RESULTS)
def test_the_committed_field_results_read_whole_one_record_a_kernel(name):
    """A field results file copied back from a GPU host and committed is read as the site imports it
    (every line checked), holds no kernel twice, and carries figures only."""
    path = FIELD / name
    records = read_jsonl(path.read_text().splitlines())
    keys = [(r["kernel"]["source_hash"], r["kernel"]["level"], r["kernel"]["problem"]) for r in records]
    assert records and len(keys) == len(set(keys))
    assert not any("source" in r["kernel"] or "log" in r["evaluation"] for r in records)


@pytest.mark.parametrize("name", COMMITTED_FIELD_RESULTS)
def test_each_committed_field_pass_was_measured_by_one_code(name):
    """Every result of a committed pass names the code that measured it (the digest of evaluation/
    and the commit), and one pass holds one code: two passes compare the host, not two harnesses."""
    records = read_jsonl((FIELD / name).read_text().splitlines())
    codes = {
        (r["evaluation"]["environment"].get("harness"), r["evaluation"]["environment"].get("harness_commit"))
        for r in records
    }
    assert len(codes) == 1 and all(next(iter(codes)))
