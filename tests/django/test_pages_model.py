import html as html_lib
import json

import pytest

from leaderboard.models import Kernel, Run
from tests.pagekit import count_queries, make_hardware, make_model, make_reported, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


def test_it_shows_runs_with_per_level_scores(client):
    problem_set = make_set(levels=(1, 1, 2))
    model = make_model("Solver")
    run = make_run(problem_set, [2.0, None, 1.5], model=model)
    run_rescorer()
    html = client.get(model.get_absolute_url()).content.decode()
    assert f'id="run-{run.pk}"' in html
    assert "66.7%" in html  # fast_1 over all levels: 2 of 3
    assert "50.0%" in html  # level 1: 1 of 2


def test_it_shows_reported_scores_with_source_and_caveat(client):
    model = make_model("Reporter")
    make_reported(model, 42, caveat="Secondary source.", source_url="https://example.org/paper")
    html = client.get(model.get_absolute_url()).content.decode()
    assert "42%" in html and "Secondary source." in html and 'href="https://example.org/paper"' in html
    assert 'id="chart-data-history"' in html


def test_it_labels_demo_models(client):
    model = make_model("Synthetic", is_demo=True)
    assert b"demo data" in client.get(model.get_absolute_url()).content


def test_it_404s_an_unknown_model(client):
    assert client.get("/models/nope/").status_code == 404


def test_it_costs_the_same_queries_with_more_runs(client):
    problem_set = make_set()
    model = make_model("Busy")
    make_run(problem_set, model=model)
    make_reported(model)
    before = count_queries(client, model.get_absolute_url())
    for index in range(4):
        make_run(problem_set, model=model, setting=f"agent-{index}")
        make_reported(model, variant=f"V{index}")
    assert count_queries(client, model.get_absolute_url()) == before


def history_figure(client, model) -> dict:
    page = client.get(model.get_absolute_url()).content.decode()
    start = page.index('id="chart-data-history"')
    return json.loads(html_lib.unescape(page[page.index(">", start) + 1 : page.index("</script>", start)]))


def test_the_history_plots_no_unmeasured_run_at_zero_and_dates_runs_by_their_figures(client):
    problem_set = make_set(levels=(1, 1))
    model = make_model("Historian")
    make_run(problem_set, [2.0, 2.0], model=model)  # evaluations finished 2026-01-01 (pagekit)
    unmeasured = Run.objects.create(model=model, problem_set=problem_set, hardware=make_hardware(), origin="imported")
    published = Run.objects.create(model=model, problem_set=problem_set, hardware=make_hardware(), origin="imported")
    for run, figure in ((unmeasured, None), (published, 3.0)):
        for problem in problem_set.problems.all():
            Kernel.objects.create(
                run=run, problem=problem, source=f"# {run.pk}", published_speedup=figure, published_hardware="L40S"
            )
    run_rescorer()
    traces = history_figure(client, model)["data"]
    points = [(trace["name"], x, y) for trace in traces for x, y in zip(trace["x"], trace["y"], strict=True)]
    assert points == [
        ("fast_1, all levels", "2026-01-01", 100.0),
        ("fast_1, all levels (published, L40S)", published.created_at.date().isoformat(), 100.0),
    ]
