import pytest

from leaderboard.models import Evaluation, Kernel
from leaderboard.reads import kernel_page
from leaderboard.reads.measured import kernel_wording
from tests.budgets import within_lines
from tests.pagekit import count_queries, evaluate, make_model, make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db

HOSTILE = 'import torch\n# </textarea><script>alert("x")</script>\nclass ModelNew(torch.nn.Module):\n    pass\n'


@pytest.fixture
def kernels():
    problem_set = make_set(levels=(1,))
    make_run(problem_set, [1.2], model=make_model("Mine"))
    make_run(problem_set, [2.4], model=make_model("Best"))
    make_run(problem_set, [0.5], model=make_model("Worse"))
    return list(Kernel.objects.order_by("pk"))


def test_it_shows_the_evaluation(client, kernels):
    html = client.get(kernels[0].get_absolute_url()).content.decode()
    assert "1.20x" in html and "1.08x" in html and "1.32x" in html  # speedup and its interval
    assert 'id="chart-data-timing"' in html


def test_it_diffs_against_the_reference_and_the_best_kernel(client, kernels):
    html = client.get(kernels[0].get_absolute_url()).content.decode()
    assert "class ModelNew(nn.Module)" in html and "diff-replace" in html
    selected = html[html.index('id="against-select"') :]
    assert f'<option value="{kernels[1].pk}" selected>' in selected  # the fastest other kernel


def test_it_diffs_against_a_picked_kernel(client, kernels):
    html = client.get(f"{kernels[0].get_absolute_url()}?against={kernels[2].pk}").content.decode()
    assert f'<option value="{kernels[2].pk}" selected>' in html


def test_it_shows_unified_view_when_asked(client, kernels):
    html = client.get(f"{kernels[0].get_absolute_url()}?view=unified").content.decode()
    assert '<div class="diff-view" data-diff-view="unified">' in html
    assert '<div class="diff-view" data-diff-view="split" hidden>' in html


def test_it_shows_hostile_source_as_text(client, kernels):
    # A stored source never changes: the hostile one is a kernel of its own.
    kernel = Kernel.objects.create(run=kernels[0].run, problem=kernels[0].problem, sample_index=99, source=HOSTILE)
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert "<script>alert" not in html and "</textarea><script>" not in html
    assert "&lt;/textarea&gt;" in html or "&lt;/textarea" in html


def test_it_escapes_error_logs(admin_client, kernels):
    evaluate(kernels[0], None, error="<img src=x onerror=alert(1)>", log="<b>log</b>")
    html = admin_client.get(kernels[0].get_absolute_url()).content.decode()  # an admin sees error and log
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_it_keeps_the_history_of_evaluations(client, kernels):
    evaluate(kernels[0], 1.4)
    html = client.get(kernels[0].get_absolute_url()).content.decode()
    history = html[html.index('id="history-table"') :]
    assert history.count("<tr") == 3  # header + two evaluations


def test_it_costs_the_same_queries_with_more_rows(client, kernels):
    before = count_queries(client, kernels[0].get_absolute_url())
    for speedup in (1.1, 3.0, None):
        make_run(kernels[0].problem.problem_set, [speedup])
        evaluate(kernels[0], speedup)
    assert count_queries(client, kernels[0].get_absolute_url()) == before


def test_it_shows_where_a_pending_evaluation_stands(client, kernels):
    from leaderboard.models import Evaluation

    kernel, other = kernels[0], kernels[1]
    hardware = kernel.run.hardware
    Evaluation.objects.create(kernel=other, hardware=hardware, state="queued")
    Evaluation.objects.create(kernel=kernel, hardware=hardware, state="queued", attempts=1)
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert f"queued, 2nd in line on eval-{hardware.slug}, retry 2" in html


def test_it_shows_the_reason_of_a_failed_evaluation(client, kernels):
    from leaderboard.models import Evaluation

    kernel = kernels[0]
    Evaluation.objects.create(
        kernel=kernel, hardware=kernel.run.hardware, state="failed", failure_reason="worker lost 3 times <b>"
    )
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert "failed: worker lost 3 times &lt;b&gt;" in html


def test_a_diff_of_the_issue_payload_costs_a_bounded_number_of_lines(client, kernels):
    """Issue 19, case 2: two 800-line kernels of one problem, `/kernels/A/?against=B`, took 20.9 s
    with difflib. The diff now stays within its step budget (Python lines executed, counted) and the
    page says the sources are too different to line up, showing both."""
    # A stored source never changes: the payload's two sources are kernels of their own.
    run, problem = kernels[0].run, kernels[0].problem
    first = Kernel.objects.create(run=run, problem=problem, sample_index=98, source="import torch\n" + "x = 1\n" * 800)
    second = Kernel.objects.create(
        run=run, problem=problem, sample_index=99, source="import torch\n" + "x = 1\ny = 2\n" * 400
    )
    # About 3.3 lines a step of line_diff, MAX_DIFF_STEPS (200,000) of them, and the rows.
    diff, _lines = within_lines(lambda: kernel_page.against_diff(first, second), budget=1_000_000)
    assert diff.too_different and (diff.removed, diff.added) == (801, 801)
    html = client.get(f"{first.get_absolute_url()}?against={second.pk}").content.decode()
    assert "differ in too many places to line up here" in html


def header(client, kernel: Kernel) -> str:
    html = client.get(kernel.get_absolute_url()).content.decode()
    return html[html.index("<h1>") : html.index('id="evaluation-heading"')]


def test_it_words_measured_here_as_every_other_page_does(client, kernels):
    kernel = kernels[0]
    assert kernel_wording(True, True, kernel.run.hardware.slug) in header(client, kernel)
    evaluate(kernel, None)  # measured again: not correct this time
    assert kernel_wording(True, False, kernel.run.hardware.slug) in header(client, kernel)


def test_a_kernel_not_evaluated_yet_is_not_measured_here_though_its_run_is(client, kernels):
    kernel = kernels[0]
    kernel.evaluations.all().delete()
    assert "not yet measured here" in header(client, kernel) and 'class="badge measured"' not in header(client, kernel)


def history_row(client, kernel: Kernel) -> str:
    html = client.get(kernel.get_absolute_url()).content.decode()
    body = html[html.index('id="history-table"') :]
    body = body[body.index("<tbody>") :]
    return body[: body.index("</tr>")]


def test_a_finished_evaluation_no_worker_here_ran_says_none_here_not_zero_attempts(client, kernels):
    kernel = kernels[0]  # evaluated by the test (as an import or the demo would be): 0 attempts here
    assert "none here" in history_row(client, kernel) and "<td>0</td>" not in history_row(client, kernel)
    kernel.latest_evaluation.attempts = 2
    kernel.latest_evaluation.save(update_fields=["attempts"])
    assert "<td>2</td>" in history_row(client, kernel)


def test_a_compile_error_says_it_did_not_compile_not_how_many_trials_passed(client, kernels):
    kernel = kernels[0]
    failed = evaluate(kernel, None, trials_passed=0, trials_total=5)
    Evaluation.objects.filter(pk=failed.pk).update(compiled=False, status=Evaluation.Status.COMPILE_ERROR)
    html = client.get(kernel.get_absolute_url()).content.decode()
    correctness = html[html.index('id="evaluation-correctness"') :]
    assert correctness.startswith('id="evaluation-correctness">not checked: the kernel did not compile')
    assert "0/5 trials passed" not in html and 'id="evaluation-error-missing"' in html


def test_the_compare_list_names_each_kernel_by_model_and_speedup_or_status(client, kernels):
    problem_set = kernels[0].problem.problem_set
    make_run(problem_set, [None], model=make_model("Broken"), is_demo=True)
    broken = Kernel.objects.latest("pk")
    html = client.get(kernels[0].get_absolute_url()).content.decode()
    listed = html[html.index('id="against-select"') : html.index("</select>", html.index('id="against-select"'))]
    assert f">kernel {kernels[1].pk} · Best · 2.40x (fastest)</option>" in listed
    assert f">kernel {kernels[2].pk} · Worse · 0.50x</option>" in listed
    assert f">kernel {broken.pk} · Broken (demo data) · incorrect</option>" in listed
    assert f'value="{kernels[0].pk}"' not in listed  # not itself


def test_the_compare_list_escapes_a_model_name_and_marks_the_kernel_compared_with(client, kernels):
    problem_set = kernels[0].problem.problem_set
    make_run(problem_set, [3.0], model=make_model('<b onclick="x">Bold</b>'))
    bold = Kernel.objects.latest("pk")
    html = client.get(f"{kernels[0].get_absolute_url()}?against={kernels[2].pk}").content.decode()
    listed = html[html.index('id="against-select"') : html.index("</select>", html.index('id="against-select"'))]
    assert f"kernel {bold.pk} · &lt;b onclick=&quot;x&quot;&gt;Bold&lt;/b&gt; · 3.00x (fastest)" in listed
    assert "<b " not in listed
    assert f'<option value="{kernels[2].pk}" selected>' in listed
