"""Pages kept as the boards are (served.EVERY_SET): a model's page and the lists of models, problems,
reported scores and search are served from their last complete build, which any write that reaches
a problem set's boards makes stale."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Kernel
from tests.pagekit import count_queries, evaluate, make_model, make_reported, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db

KEPT_PAGES = ("/models/", "/problems/", "/reported/", "/search/?q=solver")


@pytest.fixture
def solver():
    model = make_model("Solver")
    make_run(make_set(levels=(1, 1, 2)), [2.0, None, 1.5], model=model)
    make_reported(model, 42)
    run_rescorer()
    return model


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return [query["sql"] for query in context.captured_queries]


@pytest.mark.parametrize("url", KEPT_PAGES)
def test_a_list_is_read_from_its_kept_build_in_one_query(client, solver, url):
    client.get(url)
    assert len(queries_of(client, url)) == 1  # the boards' version of every set


def test_a_model_page_is_read_from_its_kept_build_with_its_model(client, solver):
    client.get(solver.get_absolute_url())
    assert len(queries_of(client, solver.get_absolute_url())) == 2  # the model by its slug, the version
    assert 'id="board-as-of"' in client.get(solver.get_absolute_url()).content.decode()


def test_a_model_page_shows_a_new_result_once_it_is_rescored(client, solver):
    assert "66.7%" in client.get(solver.get_absolute_url()).content.decode()  # fast_1: 2 of 3
    failed = Kernel.objects.filter(run__model=solver, latest_evaluation__speedup__isnull=True).get()
    evaluate(failed, 3.0)
    run_rescorer()
    assert "100.0%" in client.get(solver.get_absolute_url()).content.decode()


def test_a_new_reported_score_shows_on_the_kept_pages_at_once(client, solver):
    for url in (solver.get_absolute_url(), "/reported/"):
        client.get(url)
    make_reported(solver, 77, variant="KernelBench Hard")
    for url in (solver.get_absolute_url(), "/reported/"):
        assert "KernelBench Hard" in client.get(url).content.decode(), url


def test_a_renamed_model_is_listed_and_found_under_its_new_name(client, solver):
    client.get("/models/"), client.get("/search/?q=solver")
    solver.name = "Renamed Solver"
    solver.save()
    assert "Renamed Solver" in client.get("/models/").content.decode()
    assert "Renamed Solver" in client.get("/search/?q=solver").content.decode()


def solver_row(client) -> str:
    html = client.get("/models/").content.decode()
    return html[html.index(">Solver</a>") : html.index("</tr>", html.index(">Solver</a>"))]


def test_a_deleted_run_leaves_the_kept_model_page_and_list(client, solver):
    run = solver.runs.get()
    assert f'id="run-{run.pk}"' in client.get(solver.get_absolute_url()).content.decode()
    assert solver_row(client).endswith('<td class="num">1</td><td class="num">1</td>')  # runs, reported
    run.delete()
    run_rescorer()  # takes its kernels' marks, but moves no version for a run that is gone
    assert f'id="run-{run.pk}"' not in client.get(solver.get_absolute_url()).content.decode()
    assert solver_row(client).endswith('<td class="num">0</td><td class="num">1</td>')
