"""One source per figure: a board row partly measured here shows published figures in every column
(labelled with their GPU), its Δ compares each measured problem with its own published figure, and
every page words "measured here" the same way (leaderboard.reads.measured)."""

from __future__ import annotations

import json

import pytest

from leaderboard.reads import charts
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import PUBLISHED, level_standings
from leaderboard.reads.measured import measured_wording
from tests.django.test_board_published import field, published_run  # noqa: F401 (the fixture)
from tests.pagekit import evaluate, make_run, make_set
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def partly(field):  # noqa: F811 (the fixture imported above)
    """The published run (13.2x, 2.0x, 0.5x on an L40S) with problem 1 measured here at 0.9x: not
    faster here, though published at 13.2x."""
    problem_set, listed, measured = field
    evaluate(listed.kernels.order_by("problem__number").first(), 0.9)
    run_rescorer()
    return problem_set, listed


def listed_row(problem_set, listed):
    return next(row for row in level_standings(BoardFilters(problem_set, 1)) if row.run.pk == listed.pk)


def test_a_partly_measured_row_shows_published_figures_in_every_column(partly):
    row = listed_row(*partly)
    assert row.ranked_by == PUBLISHED and row.ranked_hardware == "L40S"
    # Published: 3 of 3 correct, 2 above 1x, 1 above 1.5x; nothing of the one measured kernel mixed in.
    assert row.summary["correct_rate"] == pytest.approx(1.0) and row.summary["compiled_rate"] == pytest.approx(1.0)
    assert row.summary["fast_0.5"] == pytest.approx(2 / 3) and row.summary["fast_1.5"] == pytest.approx(2 / 3)
    assert row.summary["fast_2"] == pytest.approx(1 / 3)
    assert row.summary["best_fast_1"] >= row.summary["fast_1"]  # best-of-n never below sample 0 in one source
    assert row.summary["pass_at_1"] is None  # unknown from published figures


def test_a_partly_measured_row_has_its_difference_over_the_problems_measured_here(client, partly):
    problem_set, listed = partly
    row = listed_row(problem_set, listed)
    # Problem 1: measured 0.9x (not above 1) against published 13.2x (above): one fewer, of 3 problems.
    assert row.difference(1.0) == pytest.approx(-1 / 3) and row.compared_problems == 1
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    cells = html[html.index(f'data-run="{listed.pk}"') :]
    cells = cells[: cells.index("</tr>")]
    assert "-33.3 pts" in cells and "all published, L40S; 1 of 3 kernels measured here (h200)" in cells
    data = json.loads(client.get(f"/levels/1/?set={problem_set.slug}&export=json").content)
    exported = next(item for item in data["rows"] if item["run_id"] == listed.pk)
    assert exported["hardware"] == "L40S" and exported["correct"] == pytest.approx(1.0)
    assert exported["difference"] == pytest.approx(-1 / 3)


def test_the_api_ranks_and_reports_a_row_by_its_one_source(client, partly):
    problem_set, listed = partly
    data = client.get(f"/api/v1/leaderboard/?set={problem_set.slug}&level=1").json()
    row = next(item for item in data["results"] if item["run"]["id"] == listed.pk)
    assert row["fast_p"] == pytest.approx(2 / 3) and row["ranked_by"] == "published"
    assert row["hardware"] == "L40S" and row["ranked_label"] == "published, L40S"


def test_the_model_page_counts_what_is_measured_under_a_published_figure(client, partly):
    problem_set, listed = partly
    html = client.get(listed.model.get_absolute_url()).content.decode()
    assert "1 of 3 kernels measured here (h200)" in html and "not yet measured here" not in html
    assert "partly verified here (1 of 3)" in html


def test_the_run_page_names_both_hardwares(client, partly):
    problem_set, listed = partly
    html = client.get(listed.get_absolute_url()).content.decode()
    hardware = html[html.index('id="run-hardware"') :]
    hardware = hardware[: hardware.index("</dd>")]
    assert "measured here on" in hardware and "published, L40S" in hardware
    assert "1 of 3 kernels measured here (h200)" in html


def test_the_overview_counts_runs_fully_measured_beside_those_partly(client, partly):
    html = client.get("/").content.decode()
    counts = html[html.index('id="overview-runs-measured"') :]
    assert counts.startswith(
        'id="overview-runs-measured">2 runs of 2 models with kernels measured here, 1 of them fully'
    )


def test_the_grid_never_says_not_measured_of_a_kernel_that_fails_here(client, field):  # noqa: F811
    problem_set, listed, measured = field
    failing = listed.kernels.order_by("problem__number")[1]
    evaluate(failing, None)  # measured here: not correct
    run_rescorer()
    html = client.get(f"/levels/1/grid/?set={problem_set.slug}").content.decode()
    cell = html[html.index(f'data-kernel="{failing.pk}"') :]
    cell = cell[: cell.index("</td>")]
    assert "✗ fails here" in cell and "not yet measured here" not in cell and "measured here: not correct" in cell


def test_measured_wording_says_the_count_beside_its_whole():
    assert measured_wording(0, 51, "h200") == "not yet measured here"
    assert measured_wording(16, 51, "h200") == "16 of 51 kernels measured here (h200)"
    assert measured_wording(51, 51, "h200") == "all 51 kernels measured here (h200)"


def test_a_board_without_published_figures_keeps_its_measured_columns(client):
    problem_set = make_set("Plain", levels=(1, 1))
    run = make_run(problem_set, [1.8, None])
    run_rescorer()
    row = level_standings(BoardFilters(problem_set, 1))[0]
    assert row.run.pk == run.pk and row.summary["correct_rate"] == pytest.approx(0.5)
    assert row.difference(1.0) is None and row.summary["pass_at_1"] == pytest.approx(0.5)


def test_each_fast_p_series_names_one_source(partly):
    row = listed_row(*partly)
    names = [trace["name"] for trace in charts.fast_p_chart([row], None)["data"]]
    model_setting = f"{row.run.model.name} · {row.run.setting}"
    assert names == [f"{model_setting} · measured on h200", f"{model_setting} · published, L40S"]
