"""The run page /runs/<id>/ and its API sub-resources (issue 14)."""

import pytest

from leaderboard.models import Evaluation, Kernel, Origin
from leaderboard.reads import runs as reads
from problems.models import Hardware
from tests.pagekit import REFERENCE, count_queries, evaluate, make_model, make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


def add_sample(run, problem, sample, speedup):
    kernel = Kernel.objects.create(run=run, problem=problem, sample_index=sample, source=REFERENCE + f"# {sample}\n")
    evaluate(kernel, speedup)
    return kernel


def test_it_shows_each_problem_with_its_samples(client):
    problem_set = make_set(levels=(1, 1, 2))
    run = make_run(problem_set, [2.0, None, 0.5], model=make_model("Solver"))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Solver" in html
    assert 'id="problem-1-1"' in html and 'id="problem-2-1"' in html
    assert "2.00x" in html and "incorrect" in html
    kernel = run.kernels.first()
    assert f'href="/kernels/{kernel.pk}/"' in html


def test_it_scores_sample_zero_and_shows_best_of_n_apart():
    problem_set = make_set(levels=(1, 1))
    run = make_run(problem_set, [None, 1.2])
    first = problem_set.problems.get(number=1)
    add_sample(run, first, 1, 3.0)  # sample 1 correct and fast: best-of-n only
    (score,) = reads.run_scores(run, reads.run_problems(run))
    assert score.fast_p["fast_1"] == 0.5  # sample 0: only problem 2 is correct and > 1
    assert score.best_of_n["fast_1"] == 1.0
    assert score.fast_p["fast_0"] == score.correct_rate == 0.5


def test_a_correct_kernel_without_a_baseline_is_correct_and_unscored():
    problem_set = make_set(levels=(1, 1))
    run = make_run(problem_set, [1.5])
    kernel = Kernel.objects.create(run=run, problem=problem_set.problems.get(number=2), source=REFERENCE)
    evaluation = Evaluation.objects.create(
        kernel=kernel, hardware=run.hardware, origin=Origin.IMPORTED, state="done", status="correct",
        compiled=True, correct=True, speedup=None,
    )  # fmt: skip
    Kernel.objects.filter(pk=kernel.pk).update(latest_evaluation=evaluation)
    (score,) = reads.run_scores(run, reads.run_problems(run))
    assert score.correct_rate == 1.0 and score.fast_p["fast_0"] == 1.0
    assert score.fast_p["fast_1"] == 0.5 and score.unscored == 1


def test_progress_counts_the_newest_evaluation_of_each_kernel(client):
    problem_set = make_set(levels=(1, 1, 1, 1))
    run = make_run(problem_set, [1.5, 1.5, 1.5, 1.5])
    kernels = list(run.kernels.order_by("pk"))
    Evaluation.objects.create(kernel=kernels[0], hardware=run.hardware, state="queued")
    Evaluation.objects.create(kernel=kernels[1], hardware=run.hardware, state="running")
    Evaluation.objects.create(kernel=kernels[2], hardware=run.hardware, state="failed", failure_reason="gone")
    progress = reads.run_progress(run)
    counts = "1 running, 1 queued, 1 failed"  # the earlier results of all four stand meanwhile
    assert (
        progress.label
        == f"re-verifying: 1 of 4 kernels re-measured, {counts}; previous results shown meanwhile (4 of 4 kernels evaluated)"
    )
    body = client.get(f"/api/v1/runs/{run.pk}/progress/").json()
    assert body["pending"] == 2 and body["done"] is False and body["label"] == progress.label
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"re-verifying: 1 of 4 kernels re-measured, {counts}" in html
    assert 'data-pending="2"' in html and "run_progress.js" in html


def test_re_verifying_counts_what_is_re_measured_and_keeps_the_earlier_results():
    problem_set = make_set(levels=(1, 1, 1))
    run = make_run(problem_set, [1.5, 1.5, None])
    kernels = list(run.kernels.order_by("pk"))
    for kernel in kernels:  # the run is verified again: every kernel gets a new evaluation
        Evaluation.objects.create(kernel=kernel, hardware=run.hardware, state="queued")
    progress = reads.run_progress(run)
    assert progress.label == (
        "re-verifying: 0 of 3 kernels re-measured, 3 queued; previous results shown meanwhile (3 of 3 kernels evaluated)"
    )
    Evaluation.objects.filter(kernel=kernels[0]).update(state="done")  # the first one is re-measured
    assert reads.run_progress(run).label.startswith("re-verifying: 1 of 3 kernels re-measured, 2 queued;")


def test_compare_shows_where_one_run_is_correct_and_the_other_is_not(client):
    problem_set = make_set(levels=(1, 1))
    left = make_run(problem_set, [2.0, None], model=make_model("Left"))
    right = make_run(problem_set, [1.0, 1.5], model=make_model("Right"), source_note="# another kernel\n")
    html = client.get(f"/runs/{left.pk}/?compare={right.pk}").content.decode()
    assert 'id="compare-table"' in html and "only right correct" in html
    body = client.get(f"/api/v1/runs/{left.pk}/compare/{right.pk}/").json()
    assert body["summary"] == {
        "problems": 2, "only_left_correct": 0, "only_right_correct": 1, "left_faster": 1, "right_faster": 0,
        "same_source": 0,
    }  # fmt: skip
    assert body["problems"][0]["ratio"] == 2.0


def test_the_api_lists_problems_and_scores(client):
    problem_set = make_set(levels=(1, 2))
    run = make_run(problem_set, [2.0, None])
    problems = client.get(f"/api/v1/runs/{run.pk}/problems/?level=1").json()["problems"]
    assert [(p["level"], p["number"]) for p in problems] == [(1, 1)]
    assert problems[0]["samples"][0]["speedup"] == 2.0 and problems[0]["samples"][0]["status"] == "correct"
    levels = client.get(f"/api/v1/runs/{run.pk}/scores/").json()["levels"]
    assert [(s["level"], s["fast_p"]["fast_1"]) for s in levels] == [(1, 1.0), (2, 0.0)]
    assert client.get(f"/api/v1/runs/{run.pk}/problems/?level=9").status_code == 400


def test_unknown_runs_are_404(client):
    assert client.get("/runs/999/").status_code == 404
    assert client.get("/api/v1/runs/999/progress/").status_code == 404
    assert client.get("/api/v1/runs/999/export/").status_code == 404


def test_user_text_is_escaped(client):
    problem_set = make_set(levels=(1,))
    run = make_run(problem_set, [1.5], model=make_model("<script>alert(1)</script>"), name="<b>run</b>")
    problem_set.problems.update(name="<img src=x onerror=alert(2)>")
    Evaluation.objects.filter(kernel__run=run).update(flags=[{"code": "<i>flag</i>", "message": ""}])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;b&gt;run&lt;/b&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<i>flag</i>" not in html and "&lt;i&gt;flag&lt;/i&gt;" in html


def test_it_costs_the_same_queries_with_more_problems_samples_and_runs(client):
    problem_set = make_set(levels=(1, 1, 1, 2, 2, 2))
    run = make_run(problem_set, [1.5, None])
    other = make_run(problem_set, [1.0])
    url = f"/runs/{run.pk}/?compare={other.pk}"
    before = count_queries(client, url)
    for problem in problem_set.problems.all():
        add_sample(run, problem, 3, 2.0)
        add_sample(other, problem, 1, 0.5)
    make_run(problem_set, [1.1] * 6)
    assert count_queries(client, url) == before


def test_the_board_shows_each_rows_precision_and_filters_by_it(client):
    problem_set = make_set(levels=(1,))
    make_run(problem_set, [1.5], model=make_model("Half"), precision="fp16")
    make_run(problem_set, [1.5], model=make_model("Full"))
    html = client.get("/levels/1/?precision=fp16").content.decode()
    assert "Half" in html and "Full" not in html.split('id="level-table"')[-1].split("</table>")[0]
    assert '<option value="fp16" selected>' in html
    everything = client.get("/levels/1/").content.decode()
    assert 'title="precision">fp16<' in everything and 'title="precision">fp32<' in everything


def test_the_api_leaderboard_filters_by_precision(client):
    problem_set = make_set(levels=(1,))
    half = make_run(problem_set, [1.5], precision="bf16")
    make_run(problem_set, [1.5])
    body = client.get(f"/api/v1/leaderboard/?set={problem_set.slug}&level=1&precision=bf16").json()
    assert [row["run"]["id"] for row in body["results"]] == [half.pk]


def test_the_run_page_and_the_board_agree():
    from leaderboard.reads.board.choices import BoardFilters  # deferred: only this test compares
    from leaderboard.reads.board.rows import live_level_standings  # deferred: only this test compares

    problem_set = make_set(levels=(1, 1, 1))
    run = make_run(problem_set, [2.0, None, 0.7])
    add_sample(run, problem_set.problems.get(number=2), 1, 1.4)
    (row,) = live_level_standings(BoardFilters(problem_set, 1))
    (score,) = reads.run_scores(run, reads.run_problems(run))
    assert score.fast_p["fast_1"] == row.summary["fast_1"] and score.correct_rate == row.summary["correct_rate"]
    assert score.best_of_n["fast_1"] == row.summary["best_fast_1"]


def test_the_rules_line_says_how_the_runs_hardware_was_timed(client):
    # Issue 30: a CPU run's page said "CUDA events".
    problem_set = make_set(levels=(1,))
    cpu = Hardware.objects.create(slug="cpu", name="CPU", kind=Hardware.Kind.CPU)
    on_cpu, on_gpu = make_run(problem_set, [1.0], hardware=cpu), make_run(problem_set, [1.0])

    def rules_line(run):
        html = client.get(f"/runs/{run.pk}/").content.decode()
        return html[html.index('id="run-rules"') :].split("</dd>")[0]

    assert "CUDA events" not in rules_line(on_cpu) and "timed by the CPU clock" in rules_line(on_cpu)
    assert "CUDA events" in rules_line(on_gpu)


def test_compare_calls_nothing_faster_within_noise(client):
    # Issue 30: the same source measured twice on a CPU (1.05x against 1.00x) was "faster here".
    problem_set = make_set(levels=(1, 1))
    left = make_run(problem_set, [1.05, 1.05], model=make_model("Left"))
    same = make_run(problem_set, [1.0, 3.0], model=make_model("Same source"))
    other = make_run(problem_set, [1.0, 3.0], model=make_model("Other source"), source_note="# mine\n")
    summary = client.get(f"/api/v1/runs/{left.pk}/compare/{same.pk}/").json()["summary"]
    assert (summary["left_faster"], summary["right_faster"], summary["same_source"]) == (0, 0, 2)
    summary = client.get(f"/api/v1/runs/{left.pk}/compare/{other.pk}/").json()["summary"]
    assert (summary["left_faster"], summary["right_faster"], summary["same_source"]) == (0, 1, 0)  # 1.05 vs 1.0: noise
    html = client.get(f"/runs/{left.pk}/?compare={same.pk}").content.decode()
    assert "faster here on 0, faster there on 0" in html and "2 with the same source" in html


def test_the_compare_list_names_the_other_runs_newest_first_escaped_and_marks_the_one_compared(client):
    problem_set = make_set(levels=(1,))
    run = make_run(problem_set, [1.5], model=make_model("Here"))
    older = make_run(problem_set, [1.0], model=make_model("Older"))
    newer = make_run(problem_set, [2.0], model=make_model('<i onmouseover="x">Newer</i>'))
    html = client.get(f"/runs/{run.pk}/?compare={older.pk}").content.decode()
    start = html.index('id="compare-select"')
    listed = html[start : html.index("</select>", start)]
    assert listed.index(f"run {newer.pk} ·") < listed.index(f"run {older.pk} ·")
    assert "&lt;i onmouseover=&quot;x&quot;&gt;Newer&lt;/i&gt;" in listed and "<i " not in listed
    assert f'<option value="{older.pk}" selected>run {older.pk} · Older · ' in listed
    assert f'value="{run.pk}"' not in listed
