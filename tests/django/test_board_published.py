"""Boards by each source (issue 26, items 3 and 4): rows with published figures (a run from a
published leaderboard, timed on an L40S) rank by them until measured here, then by the measured
figure with the published one beside it; the grid of problems x best kernels; the problem page's
ranking; downloads with the published column; one count of "measured here" on every page."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User

from leaderboard.boards import stored as board_stored
from leaderboard.models import Kernel, Origin, Run
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import PUBLISHED, level_standings
from tests.django.reviews_factories import review
from tests.pagekit import REFERENCE, evaluate, make_hardware, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db
KERNEL = REFERENCE.replace("class Model(", "class ModelNew(")


def published_run(problem_set, speedups, name="o1-preview"):
    """A run imported from a published leaderboard: kernels with published speedups, nothing measured."""
    run = Run.objects.create(
        model=make_model(name), problem_set=problem_set, hardware=make_hardware("h200"), origin=Origin.IMPORTED,
        published_source="KernelBench's original leaderboard", setting="best correct (published)",
    )  # fmt: skip
    problems = list(problem_set.problems.order_by("level", "number"))
    for problem, speedup in zip(problems, speedups, strict=False):
        if speedup is not None:
            Kernel.objects.create(
                run=run, problem=problem, source=KERNEL + f"# {name} {problem.pk}\n",
                published_speedup=speedup, published_hardware="L40S",
            )  # fmt: skip
    return run


@pytest.fixture
def field():
    """Level 1 of three problems: a published-only run (published fast_1 2/3, on an L40S) and a
    measured run (fast_1 1/3 on the h200)."""
    problem_set = make_set("Field", levels=(1, 1, 1))
    listed = published_run(problem_set, [13.2, 2.0, 0.5])
    measured = make_run(problem_set, [1.8, 0.9, None], model=make_model("measured-model"))
    run_rescorer()
    return problem_set, listed, measured


def board_rows(html: str) -> list[str]:
    return [chunk.split('"', 1)[0] for chunk in html.split('data-run="')[1:]]


def test_a_published_only_row_ranks_by_its_published_figure_labelled_so(client, field):
    problem_set, listed, measured = field
    rows = level_standings(BoardFilters(problem_set, 1))
    assert [row.run.pk for row in rows] == [listed.pk, measured.pk]  # 66.7% published above 33.3% measured
    assert rows[0].ranked_by == PUBLISHED and rows[0].ranked_label == "published, L40S"
    assert rows[0].rank_value(1.0) == pytest.approx(2 / 3) and rows[0].fast_p(1.0) == 0.0
    assert rows[0].ranked_hardware == "L40S" and rows[1].ranked_hardware == "h200"
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    assert board_rows(html) == [str(listed.pk), str(measured.pk)]
    row = html[html.index(f'data-run="{listed.pk}"') :]
    row = row[: row.index("</tr>")]
    assert 'data-ranked-by="published"' in row and "66.7%" in row and "published, L40S" in row
    assert '<td data-key="hardware" class="">L40S</td>' in row  # never h200 for figures timed on an L40S
    assert "imported, unverified" in row


def test_once_measured_a_row_ranks_by_the_measured_figure_with_the_published_beside(client, field):
    problem_set, listed, measured = field
    for kernel, speedup in zip(listed.kernels.order_by("problem__number"), [1.2, None, None], strict=True):
        evaluate(kernel, speedup)  # measured here: 1 of 3 correct and faster, two fail
    run_rescorer()
    rows = level_standings(BoardFilters(problem_set, 1))
    first = next(row for row in rows if row.run.pk == listed.pk)
    assert first.ranked_by == "measured" and first.verified
    assert first.rank_value(1.0) == pytest.approx(1 / 3) and first.published_fast_p(1.0) == pytest.approx(2 / 3)
    assert first.difference(1.0) == pytest.approx(-1 / 3)
    assert [row.run.pk for row in rows] == [measured.pk, listed.pk]  # both 1/3: the one with more correct first
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    row = html[html.index(f'data-run="{listed.pk}"') :]
    row = row[: row.index("</tr>")]
    assert 'data-ranked-by="measured"' in row and "-33.3 pts" in row and "66.7%" in row
    assert '<td data-key="hardware" class="">h200</td>' in row
    assert "verified here" in row and "imported, unverified" not in row
    run_page = client.get(listed.get_absolute_url()).content.decode()
    assert "verified here" in run_page and "3 kernels measured here" in run_page


def test_the_leaders_by_each_source_are_named_above_the_table(client, field):
    problem_set, listed, measured = field
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    box = html[html.index('id="board-leaders"') : html.index('id="level-table"')]
    by_measured = box[box.index('id="leader-measured"') : box.index('id="leader-published"')]
    by_published = box[box.index('id="leader-published"') :]
    assert "measured-model" in by_measured and "33.3%" in by_measured
    assert "o1-preview" in by_published and "66.7%" in by_published and "published, L40S" in by_published


def test_the_leaders_name_the_picked_p_even_p_0(client, field):
    """p = 0 is a p asked for (correct at all), not the default: the leaders and their heading are
    fast_0's, as the table's are."""
    problem_set, listed, measured = field
    html = client.get(f"/levels/1/?set={problem_set.slug}&p=0").content.decode()
    box = html[html.index('id="board-leaders"') : html.index('id="level-table"')]
    by_measured = box[box.index('id="leader-measured"') : box.index('id="leader-published"')]
    by_published = box[box.index('id="leader-published"') :]
    assert "(fast_0)" in by_measured and "measured-model" in by_measured and "66.7%" in by_measured
    assert "(fast_0)" in by_published and "100.0%" in by_published


def test_the_published_column_sorts(client, field):
    problem_set, listed, measured = field
    html = client.get(f"/levels/1/?set={problem_set.slug}&sort=published&dir=asc").content.decode()
    assert board_rows(html) == [str(measured.pk), str(listed.pk)]  # no published figure sorts last (first, ascending)


def test_downloads_hold_the_published_column(client, field):
    problem_set, listed, measured = field
    text = client.get(f"/levels/1/?set={problem_set.slug}&export=csv").content.decode()
    table = list(csv.DictReader(io.StringIO(text)))
    first = table[0]
    assert first["run id"] == str(listed.pk) and float(first["fast_1"]) == pytest.approx(2 / 3)
    assert float(first["fast_1 published"]) == pytest.approx(2 / 3) and first["ranked by"] == "published, L40S"
    assert first["Hardware"] == "L40S" and first["published on"] == "L40S"
    assert table[1]["fast_1 published"] == "" and table[1]["ranked by"] == "measured here, h200"
    data = client.get(f"/levels/1/?set={problem_set.slug}&export=json").json()
    assert "published" in data["columns"] and "difference" in data["columns"]
    row = data["rows"][0]
    assert row["run_id"] == listed.pk and row["published"] == pytest.approx(2 / 3) and row["ranked_by"] == "published"
    assert row["published_label"] == "published, L40S" and row["hardware"] == "L40S"


def test_the_chart_draws_the_published_curve(client, field):
    problem_set, listed, measured = field
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    chart = html[html.index('id="chart-data-fast_p"') :]
    chart = chart[: chart.index("</script>")]
    assert "published, L40S" in chart and "(published, L40S)" not in chart  # named by its source alone


def test_the_grid_shows_problems_by_best_kernels_with_marks(client, field):
    problem_set, listed, measured = field
    one, two, three = listed.kernels.order_by("problem__number")
    evaluate(two, None)  # published 2.0x, fails here
    evaluate(three, 0.5)  # published 0.5x, measured 0.5x (0.45-0.55): agrees
    run_rescorer()
    html = client.get(f"/levels/1/grid/?set={problem_set.slug}").content.decode()
    grid = html[html.index('id="level-grid"') :]
    first = grid[grid.index('data-problem="1"') : grid.index('data-problem="2"')]
    # Problem 1: the published 13.2x (not measured here) before the measured 1.8x.
    cells = [chunk.split('"', 1)[0] for chunk in first.split('data-kernel="')[1:]]
    assert cells[0] == str(one.pk) and len(cells) == 2
    assert (
        f'href="/kernels/{one.pk}/"' in first and "13.20x published, L40S" in first and "not yet measured here" in first
    )
    second = grid[grid.index('data-problem="2"') : grid.index('data-problem="3"')]
    assert f'data-kernel="{two.pk}" data-mark="fails here"' in second and "✗ fails here" in second
    third = grid[grid.index('data-problem="3"') :]
    assert f'data-kernel="{three.pk}"' in third and "disagrees" not in third.split("</tr>")[0]


def test_the_grid_marks_a_published_figure_outside_the_measured_interval(client, field):
    problem_set, listed, measured = field
    one = listed.kernels.get(problem__number=1)
    evaluate(one, 3.0)  # measured 2.7-3.3x against the published 13.2x
    run_rescorer()
    html = client.get(f"/levels/1/grid/?set={problem_set.slug}").content.decode()
    assert f'data-kernel="{one.pk}" data-mark="disagrees"' in html and "≠ disagrees" in html


def test_the_problem_page_ranks_kernels_by_speedup_measured_else_published(client, field):
    problem_set, listed, measured = field
    problem = problem_set.problems.get(level=1, number=1)
    slow = published_run(problem_set, [1.1], name="aaa-first-by-name")  # published 1.1x
    failing = published_run(problem_set, [40.0], name="fails-here")  # published 40x, fails here
    evaluate(failing.kernels.get(), None)
    run_rescorer()
    html = client.get(problem.get_absolute_url()).content.decode()
    table = html[html.index('id="kernels-table"') :]
    order = [name for name in ("o1-preview", "measured-model", "aaa-first-by-name", "fails-here") if name in table]
    assert sorted(order, key=table.index) == ["o1-preview", "measured-model", "aaa-first-by-name", "fails-here"]
    assert "13.20x" in table and "published, L40S" in table
    assert slow.kernels.get().ranked_speedup == 1.1 and failing.kernels.get().ranked_speedup is None


def test_every_page_counts_measured_here_alike(client, field):
    problem_set, listed, measured = field
    assert board_stored.measured_here([listed.pk, measured.pk]) == {listed.pk: 0, measured.pk: 3}
    overview = client.get("/").content.decode()
    assert "1 run of 1 model with kernels measured here, 1 of them fully" in overview
    evaluate(listed.kernels.order_by("problem__number").first(), 1.5)  # one kernel of the listed run measured
    run_rescorer()
    assert board_stored.measured_here([listed.pk]) == {listed.pk: 1}
    assert "2 runs of 2 models with kernels measured here, 1 of them fully" in client.get("/").content.decode()
    assert "verified here" in client.get(listed.get_absolute_url()).content.decode()
    model_page = client.get(listed.model.get_absolute_url()).content.decode()
    assert "verified here" in model_page


def test_the_overview_names_the_leader_by_published_figures(client, field):
    problem_set, listed, measured = field
    html = client.get("/").content.decode()
    card = html[html.index('id="strongest-published"') :]
    assert "o1-preview" in card[:600] and "published, L40S" in card[:800]
    measured_card = html[html.index('id="strongest-measured"') : html.index('id="strongest-published"')]
    assert "measured-model" in measured_card


def test_a_kernel_measured_here_says_so_on_its_page(client, field):
    problem_set, listed, measured = field
    kernel = listed.kernels.order_by("problem__number").first()

    def header() -> str:
        html = client.get(kernel.get_absolute_url()).content.decode()
        return html[html.index("<h1>") : html.index('id="evaluation-heading"')]

    assert "not yet measured here" in header()
    evaluate(kernel, 1.2)
    assert "measured here (h200)" in header() and "not yet" not in header()


def test_a_partly_measured_row_says_so_on_the_board_and_the_overview(client, field):
    problem_set, listed, measured = field
    measured.delete()  # only the published run: no row is fully measured
    evaluate(listed.kernels.order_by("problem__number").first(), 1.2)  # 1 of its 3 kernels measured here
    run_rescorer()
    html = client.get(f"/levels/1/?set={problem_set.slug}").content.decode()
    card = html[html.index('id="leader-measured"') : html.index('id="leader-published"')]
    assert "No row fully measured here yet: 1 row partly (1 of 3 kernels so far)" in card
    published_card = html[html.index('id="leader-published"') : html.index('id="level-table"')]
    assert "1 of 3 kernels measured here (h200)" in published_card and "not yet measured" not in published_card
    row = html[html.index(f'data-run="{listed.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "partly verified here (1 of 3)" in row and 'data-ranked-by="published"' in row
    overview = client.get("/").content.decode()
    assert 'id="strongest-partly"' in overview and "No run fully measured here yet: 1 partly" in overview


def test_the_grid_keeps_each_problems_best_five_in_rank_order_without_excluded_ones(client):
    # Seven kernels on one problem: two tie (the older first), one has no figure (ranks as 0), one
    # was excluded by a reviewer; the grid shows the first five by the figure they rank by. The
    # cells' kernels are read per problem down an index on PostgreSQL, by a window elsewhere.
    problem_set = make_set("Seven", levels=(1,))
    run = published_run(problem_set, [1.0], name="model-a")
    problem = problem_set.problems.get()
    figures = [4.0, 9.0, 2.5, 9.0, None, 30.0, 6.0]
    made = [
        Kernel.objects.create(run=run, problem=problem, source=KERNEL + f"# seven {n}\n", sample_index=n + 1,
                              published_speedup=figure, published_hardware="L40S")
        for n, figure in enumerate(figures)
    ]  # fmt: skip
    review(made[5], User.objects.create_user("judge"), "reward_hack")  # the 30x, excluded
    run_rescorer()
    html = client.get(f"/levels/1/grid/?set={problem_set.slug}").content.decode()
    row = html[html.index('data-problem="1"') :].split("</tr>")[0]
    cells = [int(chunk.split('"', 1)[0]) for chunk in row.split('data-kernel="')[1:]]
    assert cells == [made[1].pk, made[3].pk, made[6].pk, made[0].pk, made[2].pk]
