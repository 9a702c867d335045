"""Whether a kernel's two measurements here agree (leaderboard.reads.repeats): the selector, and the
kernel page, the problem page, the grid and a board row saying so."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import Evaluation, Kernel, Origin, Run
from leaderboard.reads import repeats
from tests.django.test_results_exchange import export, load, measured, world
from tests.pagekit import make_hardware, make_model, make_run, make_set, plain_static  # noqa: F401
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db
DAY = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HOST_BOUND = [{"code": "host_bound", "message": "The host's dispatch is a large part of its time"}]


def measure(kernel: Kernel, speedup: float | None, day: int, low=None, high=None, **extra) -> Evaluation:
    """A finished evaluation measured here, `day` days into 2026; a narrow interval (±0.5%) unless given."""
    correct = speedup is not None
    values = {
        "status": "correct" if correct else "incorrect", "compiled": True, "correct": correct, "speedup": speedup,
        "speedup_low": low if low is not None else (speedup * 0.995 if correct else None),
        "speedup_high": high if high is not None else (speedup * 1.005 if correct else None),
    }  # fmt: skip
    evaluation = Evaluation.objects.create(
        kernel=kernel, hardware=kernel.run.hardware, state=Evaluation.State.DONE,
        finished_at=DAY + dt.timedelta(days=day), **{**values, **extra},
    )  # fmt: skip
    kernel.latest_evaluation = evaluation
    kernel.save(update_fields=["latest_evaluation"])
    return evaluation


@pytest.fixture
def kernels() -> list[Kernel]:
    """Six problems of level 1, one run's kernel on each (measured once already, by make_run: 1.5x
    on 2026-01-01), on a hardware named H200."""
    problem_set = make_set("Repeats", levels=(1,) * 6)
    make_run(problem_set, model=make_model("Twice-model"))
    return list(Kernel.objects.order_by("problem__number"))


def repeat_of(kernel: Kernel) -> repeats.Repeat:
    (found,) = repeats.kernel_repeats(kernel.pk)
    return found


# --- the selector ---------------------------------------------------------------------------


def test_two_measurements_within_two_percent_agree(kernels):
    measure(kernels[0], 2.01, 10)
    measure(kernels[0], 2.03, 11)
    repeat = repeat_of(kernels[0])
    assert repeat.times == 3 and repeat.twice and repeat.verdicts_equal
    assert (repeat.first.speedup, repeat.second.speedup) == (2.01, 2.03)  # the two most recent, oldest first
    assert repeat.gap == pytest.approx(2.03 / 2.01 - 1) and repeat.within and repeat.agree
    assert repeat.first_covers_second is False and not repeat.host_bound
    assert repeat.wording == "Measured 3 times on H200; the two most recent: 2.01x and 2.03x, 1.0% apart"
    assert repeat.mark == "×3, 1.0%" and repeat.agreement == repeats.AGREES


def test_two_measurements_ten_percent_apart_do_not_agree(kernels):
    Evaluation.objects.filter(kernel=kernels[1]).delete()
    measure(kernels[1], 2.2, 10)
    measure(kernels[1], 2.0, 11)
    repeat = repeat_of(kernels[1])
    assert repeat.times == 2 and repeat.gap == pytest.approx(0.1) and not repeat.within and not repeat.agree
    assert repeat.wording == "Measured twice on H200: 2.20x and 2.00x, 10.0% apart (more than 2%)"
    assert repeat.mark == "×2, 10.0% apart" and repeat.agreement == repeats.DIFFERS


def test_exactly_two_percent_apart_is_within(kernels):
    measure(kernels[1], 1.0, 10)
    measure(kernels[1], 1.02, 11)
    assert repeat_of(kernels[1]).within


def test_verdicts_that_differ_never_agree(kernels):
    measure(kernels[2], 1.5, 10)  # the same speedup as make_run's: only the verdict differs
    measure(kernels[2], None, 11)
    repeat = repeat_of(kernels[2])
    assert not repeat.verdicts_equal and not repeat.agree and repeat.gap is None
    assert repeat.wording == "Measured 3 times on H200; the two most recent: verdicts differ: correct / incorrect"
    assert repeat.mark == "×3, verdicts differ"


def host_bound_pair(kernel: Kernel, second_low: float, second_high: float) -> repeats.Repeat:
    """1.12x host-bound (interval 0.9-9.0x), then 8.01x with the interval given: the kernel's only two."""
    Evaluation.objects.filter(kernel=kernel).delete()
    measure(kernel, 1.12, 10, low=0.9, high=9.0, notes=HOST_BOUND)
    measure(kernel, 8.01, 11, low=second_low, high=second_high)
    return repeat_of(kernel)


def test_host_bound_measurements_agree_when_each_interval_covers_the_other(kernels):
    repeat = host_bound_pair(kernels[3], 1.0, 9.5)
    assert repeat.host_bound and repeat.first_covers_second and repeat.second_covers_first
    assert not repeat.within and repeat.covered and repeat.agree
    assert repeat.wording == (
        "Measured twice on H200: 1.12x and 8.01x, 615.2% apart, host-bound: each interval covers the other's figure"
    )
    assert repeat.mark == "×2, host-bound, covered"


def test_host_bound_with_no_interval_covering_both_figures_differs(kernels):
    kernel = kernels[3]
    Evaluation.objects.filter(kernel=kernel).delete()
    measure(kernel, 1.12, 10, low=0.9, high=2.0, notes=HOST_BOUND)
    measure(kernel, 8.01, 11, low=7.9, high=8.1)
    repeat = repeat_of(kernel)
    assert repeat.host_bound and not repeat.covered and not repeat.agree
    assert repeat.wording.endswith("host-bound: neither interval covers the other's figure")


def test_an_interval_that_is_not_host_bound_covers_nothing(kernels):
    # Only a host-bound reading's interval is widened to cover what another process reads: the second
    # measurement's interval, not host-bound, holding the first's figure is no agreement.
    kernel = kernels[3]
    Evaluation.objects.filter(kernel=kernel).delete()
    measure(kernel, 1.12, 10, low=0.9, high=2.0, notes=HOST_BOUND)
    measure(kernel, 8.01, 11, low=1.0, high=9.5)
    repeat = repeat_of(kernel)
    assert repeat.host_bound and repeat.second_covers_first and not repeat.first_covers_second
    assert not repeat.covered and not repeat.agree


def test_host_bound_with_one_interval_covering_both_figures_agrees(kernels):
    # The field's rule (and the GPU check's): one interval that covers both figures.
    repeat = host_bound_pair(kernels[3], 7.9, 8.1)
    assert repeat.host_bound and repeat.first_covers_second and not repeat.second_covers_first
    assert repeat.agree and repeat.wording.endswith("host-bound: only the first interval covers the other's figure")


def test_measured_once_says_so_and_never_measured_says_nothing(kernels):
    never = Kernel.objects.create(run=kernels[0].run, problem=kernels[0].problem, sample_index=1, source="x = 1\n")
    found = repeats.repeats_of([kernels[4].pk, never.pk])
    assert list(found) == [kernels[4].pk]
    (once,) = found[kernels[4].pk]
    assert not once.twice and not once.agree and once.agreement == repeats.ONCE
    assert once.wording == "Measured once on H200" and once.mark == "measured once"


def test_only_done_measurements_here_count_and_each_hardware_apart(kernels):
    kernel = kernels[5]
    measure(kernel, 9.0, 10, origin=Origin.IMPORTED)  # measured elsewhere
    Evaluation.objects.create(kernel=kernel, hardware=kernel.run.hardware)  # queued
    other = make_hardware("h100")
    Evaluation.objects.create(kernel=kernel, hardware=other, state="done", status="correct", correct=True,
                              speedup=1.51, finished_at=DAY)  # fmt: skip
    found = {repeat.hardware: repeat for repeat in repeats.kernel_repeats(kernel.pk)}
    assert set(found) == {"H200", "H100"} and not found["H200"].twice and not found["H100"].twice


def test_two_passes_of_import_results_give_a_kernel_measured_twice(tmp_path):
    kernel, hardware = world()
    first = measured(kernel, hardware, flags=[])
    export(tmp_path / "pass1.jsonl")
    measured(
        kernel,
        hardware,
        flags=[],
        speedup=1.26,
        kernel_ms=1 / 1.26,
        finished_at=first.finished_at + dt.timedelta(days=1),
    )
    export(tmp_path / "pass2.jsonl")
    Evaluation.objects.all().delete()
    load(tmp_path / "pass1.jsonl")
    assert repeat_of(kernel).wording == "Measured once on NVIDIA H200"
    load(tmp_path / "pass2.jsonl")
    assert repeat_of(kernel).wording == "Measured twice on NVIDIA H200: 1.25x and 1.26x, 0.8% apart"


def test_the_selector_costs_one_query_for_any_number_of_kernels(kernels, django_assert_num_queries):
    problem_set = kernels[0].problem.problem_set
    for _ in range(10):
        for kernel in make_run(problem_set).kernels.all():
            measure(kernel, 1.52, 10)
    ids = list(Kernel.objects.values_list("pk", flat=True))
    assert len(ids) == 66
    with django_assert_num_queries(1):
        found = repeats.repeats_of(ids)
    assert sum(repeat.twice for listed in found.values() for repeat in listed) == 60
    runs = list(Run.objects.filter(problem_set=problem_set))
    with django_assert_num_queries(1):
        rows = repeats.row_repeats(runs, 1)
    assert sum(row.twice for row in rows.values()) == 60 and sum(row.agree for row in rows.values()) == 60


# --- the pages ------------------------------------------------------------------------------


def test_the_kernel_page_says_both_figures_beside_the_published_one(client, kernels):
    kernel = kernels[0]
    Kernel.objects.filter(pk=kernel.pk).update(published_speedup=2.5, published_hardware="L40S")
    Evaluation.objects.filter(kernel=kernel).delete()
    measure(kernel, 2.01, 10)
    measure(kernel, 2.03, 11)
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert html.index('id="kernel-published"') < html.index('id="kernel-repeats"')
    line = html[html.index('id="kernel-repeats"') :]
    assert "Measured twice on H200: 2.01x and 2.03x, 1.0% apart" in line[: line.index("</p>")]


def test_the_kernel_page_says_verdicts_differ_and_escapes_the_hardware_name(client, kernels):
    kernel = kernels[2]
    hardware = kernel.run.hardware
    hardware.name = "H200 <b>bold</b>"
    hardware.save()
    measure(kernel, None, 10)
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert "Measured twice on H200 &lt;b&gt;bold&lt;/b&gt;: verdicts differ: correct / incorrect" in html
    assert "<b>bold</b>" not in html


def test_the_kernel_page_says_measured_once(client, kernels):
    assert "Measured once on H200" in client.get(kernels[4].get_absolute_url()).content.decode()


def test_the_problem_page_marks_each_kernel_row(client, kernels):
    Evaluation.objects.filter(kernel=kernels[0]).delete()
    measure(kernels[0], 2.01, 10)
    measure(kernels[0], 2.03, 11)
    run_rescorer()
    html = client.get(kernels[0].problem.get_absolute_url()).content.decode()
    table = html[html.index('id="kernels-table"') :]
    assert 'data-repeat="agrees" title="Measured twice on H200: 2.01x and 2.03x, 1.0% apart">×2, 1.0%</div>' in table


def test_the_grid_marks_each_cell(client, kernels):
    host_bound_pair(kernels[3], 1.0, 9.5)
    measure(kernels[1], 2.0, 11)  # 1.5x, then 2.0x
    run_rescorer()
    html = client.get(f"/levels/1/grid/?set={kernels[0].problem.problem_set.slug}").content.decode()
    fourth = html[html.index('data-problem="4"') :]
    assert ">×2, host-bound, covered</div>" in fourth[: fourth.index("</tr>")]
    second = html[html.index('data-problem="2"') :]
    assert 'data-repeat="differs"' in second[: second.index("</tr>")] and "×2, 33.3% apart" in second
    first = html[html.index('data-problem="1"') :]
    assert ">measured once</div>" in first[: first.index("</tr>")]


def test_a_board_row_counts_its_kernels_measured_twice_and_those_that_agree(client, kernels):
    measure(kernels[0], 1.51, 10)  # 1.5x and 1.51x: agree
    measure(kernels[1], 2.0, 10)  # 1.5x and 2.0x: apart
    measure(kernels[2], 1.6, 10, notes=HOST_BOUND, low=1.2, high=4.0)  # 6.7% apart, host-bound, covered
    run_rescorer()
    slug = kernels[0].problem.problem_set.slug
    html = client.get(f"/levels/1/?set={slug}").content.decode()
    row = html[html.index(f'data-run="{kernels[0].run_id}"') :]
    expected = "3 kernels measured twice: 2 agree (within 2%, or host-bound and covered)"
    assert expected in row[: row.index("</tr>")]
    download = client.get(f"/levels/1/?set={slug}&export=csv").content.decode()
    (line,) = list(csv.DictReader(io.StringIO(download)))
    assert expected in line["Notes"]


def test_the_api_board_counts_them_too(client, kernels):
    measure(kernels[0], 1.51, 10)  # agree
    measure(kernels[1], 2.0, 10)  # apart
    run_rescorer()
    slug = kernels[0].problem.problem_set.slug
    (row,) = client.get(f"/api/v1/leaderboard/?set={slug}&level=1").json()["results"]
    assert row["repeats"] == {"twice": 2, "agree": 1}
    Evaluation.objects.filter(kernel__in=kernels[:2], speedup__in=(1.51, 2.0)).delete()
    run_rescorer()
    (row,) = client.get(f"/api/v1/leaderboard/?set={slug}&level=1&page_size=7").json()["results"]
    assert row["repeats"] is None


def test_a_board_row_without_repeats_says_nothing_of_them(client, kernels):
    run_rescorer()
    html = client.get(f"/levels/1/?set={kernels[0].problem.problem_set.slug}").content.decode()
    row = html[html.index(f'data-run="{kernels[0].run_id}"') :]
    notes = row[row.index('<td data-key="notes"') : row.index("</tr>")]
    assert "measured twice" not in notes


def test_the_pages_cost_the_same_queries_with_more_kernels_measured_twice(client, kernels):
    url = f"/levels/1/?set={kernels[0].problem.problem_set.slug}"
    pages = [url, url.replace("/?", "/grid/?"), kernels[0].problem.get_absolute_url()]
    before = [_queries(client, page) for page in pages]
    for kernel in kernels:
        measure(kernel, 1.51, 10)
    for _ in range(3):
        for kernel in make_run(kernels[0].problem.problem_set).kernels.all():
            measure(kernel, 1.49, 10)
    assert [_queries(client, page) for page in pages] == before


def _queries(client, url: str) -> int:
    run_rescorer()
    caches["default"].clear()  # a fresh build each time: the build's own queries are counted
    with CaptureQueriesContext(connection) as context:
        assert client.get(url).status_code == 200
    return len(context.captured_queries)
