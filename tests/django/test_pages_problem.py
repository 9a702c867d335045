import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Evaluation, Kernel
from problems.models import Baseline
from tests.pagekit import count_queries, make_hardware, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem():
    problem_set = make_set(levels=(1,))
    make_run(problem_set, [0.8], model=make_model("Slowpoke"))
    make_run(problem_set, [3.0], model=make_model("Rocket"))
    make_run(problem_set, [None], model=make_model("Broken"))
    run_rescorer()
    return problem_set.problems.get()


def test_it_ranks_kernels_by_speedup(client, problem):
    html = client.get(problem.get_absolute_url()).content.decode()
    table = html[html.index('id="kernels-table"') :]
    assert table.index("Rocket") < table.index("Slowpoke") < table.index("Broken")
    assert "incorrect" in table


def test_it_highlights_the_reference(client, problem):
    html = client.get(problem.get_absolute_url()).content.decode()
    assert 'class="highlight"' in html and "ModelNew" not in html[html.index('id="source-heading"') :]


def test_it_lists_baselines_per_hardware(client, problem):
    Baseline.objects.create(problem=problem, hardware=make_hardware("h100"), mean_ms=1.234)
    assert b"1.234 ms" in client.get(problem.get_absolute_url()).content


def test_it_charts_the_speedups(client, problem):
    assert b'id="chart-data-speedups"' in client.get(problem.get_absolute_url()).content


def test_it_costs_the_same_queries_with_more_kernels(client, problem):
    before = count_queries(client, problem.get_absolute_url())
    for speedup in (1.1, 1.2, None, 0.4):
        make_run(problem.problem_set, [speedup])
    assert Kernel.objects.filter(problem=problem).count() == 7
    assert count_queries(client, problem.get_absolute_url()) == before


def test_submit_a_kernel_is_offered_only_to_who_may_submit(client, problem, ingestor, visitor):
    # Issue 30: signed-out visitors were offered a form that then refused them.
    assert "Submit a kernel" not in client.get(problem.get_absolute_url()).content.decode()
    client.force_login(visitor)
    assert "Submit a kernel" not in client.get(problem.get_absolute_url()).content.decode()
    client.force_login(ingestor)
    assert "Submit a kernel" in client.get(problem.get_absolute_url()).content.decode()


def test_it_shows_whether_zeros_pass_and_how_many_kernels_lowered_the_precision(client, problem):
    kernels = list(Kernel.objects.filter(problem=problem).select_related("latest_evaluation").order_by("pk"))
    flagged = [("input_independent_reference", "precision_downgrade"), ("precision_downgrade",), ()]
    for kernel, codes in zip(kernels, flagged, strict=True):
        kernel.latest_evaluation.flags = [{"code": code, "message": "<b>x</b>"} for code in codes]
        kernel.latest_evaluation.save(update_fields=["flags"])
    html = client.get(problem.get_absolute_url()).content.decode()
    zeros = html[html.index('id="problem-zeros-pass"') :]
    assert "barely depends on its inputs" in zeros and "1 of 3 kernels" in zeros
    precision = html[html.index('id="problem-precision"') :]
    assert precision.startswith('id="problem-precision">2 of 3 evaluated kernels computed it in lower precision')


def baselines_table(client, problem) -> str:
    html = client.get(problem.get_absolute_url()).content.decode()
    table = html[html.index('id="baselines-table"') :]
    return table[: table.index("</table>")]


def test_speedups_measured_here_come_with_the_reference_times_they_divide(client, problem):
    table = baselines_table(client, problem)  # no Baseline imported; two correct kernels timed the reference
    assert "No baseline timings recorded" not in table
    assert "timed beside each of 2 evaluations" in table and "measured here" in table


def test_a_problem_with_no_timing_at_all_says_so(client):
    problem_set = make_set(levels=(1,))
    make_run(problem_set, [None], model=make_model("Broken"))
    assert "No baseline timings recorded" in baselines_table(client, problem_set.problems.get())


def _reads(client, url: str, table: str) -> bool:
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return any(table in query["sql"] for query in context.captured_queries)


def test_a_repeat_visit_is_served_from_the_kept_build(client, problem):
    # Its checks and reference times count every kernel and evaluation of the problem (1.3 s at
    # 13 M evaluations): a visit with nothing written since reads none of them.
    url = problem.get_absolute_url()
    assert _reads(client, url, Evaluation._meta.db_table)
    assert not _reads(client, url, Evaluation._meta.db_table)
    client.get(url + "?page=1&utm=x")  # another page of kernels: a kept build of its own
    assert not _reads(client, url + "?page=1&utm=y", Evaluation._meta.db_table)  # unknown parameters dropped


def test_what_is_written_after_a_visit_shows_on_the_next(client, problem):
    url = problem.get_absolute_url()
    assert "Newcomer" not in client.get(url).content.decode()
    make_run(problem.problem_set, [9.0], model=make_model("Newcomer"))
    assert "Newcomer" in client.get(url).content.decode()
    Baseline.objects.create(problem=problem, hardware=make_hardware("h100"), mean_ms=4.321)
    assert "4.321 ms" in client.get(url).content.decode()
    Baseline.objects.filter(problem=problem).delete()
    assert "4.321 ms" not in client.get(url).content.decode()


def test_the_page_says_as_of_when_its_scores_were_read(client, problem):
    assert 'id="board-as-of"' in client.get(problem.get_absolute_url()).content.decode()
