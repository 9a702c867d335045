import pytest

from tests.pagekit import count_queries, make_model, make_reported, make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


def test_it_shows_runs_with_per_level_scores(client):
    problem_set = make_set(levels=(1, 1, 2))
    model = make_model("Solver")
    run = make_run(problem_set, [2.0, None, 1.5], model=model)
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
