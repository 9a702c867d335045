import pytest

from leaderboard.models import Kernel
from problems.models import Baseline
from tests.pagekit import count_queries, make_hardware, make_model, make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def problem():
    problem_set = make_set(levels=(1,))
    make_run(problem_set, [0.8], model=make_model("Slowpoke"))
    make_run(problem_set, [3.0], model=make_model("Rocket"))
    make_run(problem_set, [None], model=make_model("Broken"))
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
