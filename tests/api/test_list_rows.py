"""The evaluation, run and kernel lists are written from values() rows (ReadOnly.list_values), not
by their serializers: the rows must come out byte for byte as the serializers write them, for every
kind of caller, filter and page, on a varied set of rows (nulls, imported and demo rows, withheld
output, flags, published figures, kernels never evaluated)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from leaderboard.api.evaluations import EvaluationViewSet
from leaderboard.api.kernels import KernelViewSet
from leaderboard.api.runs import RunViewSet
from leaderboard.models import Evaluation, Kernel, LanguageModel, Origin, Run
from problems.models import Hardware, ScoringRules
from tests.api.conftest import KERNEL

pytestmark = pytest.mark.django_db

WORKER = "gpu-host-3.991.ef01"
URLS = [
    "/api/v1/evaluations/",
    "/api/v1/evaluations/?page_size=3&page=2",
    "/api/v1/evaluations.json?origin=imported",
    "/api/v1/evaluations/?state=queued",
    "/api/v1/runs/",
    "/api/v1/runs/?page_size=1&page=2",
    "/api/v1/runs.json?origin=measured",
    "/api/v1/kernels/",
    "/api/v1/kernels/?page_size=2&page=3",
    "/api/v1/kernels.json?backend=triton",
    "/api/v1/kernels/?level=1&page_size=4",
]


@pytest.fixture
def varied(run, ingestor, hardware) -> None:
    """Beside the conftest's measured run: an imported run made by the ingestor (a published figure
    with and without its hardware, a kernel never evaluated, a queued evaluation, a failed one whose
    text names its worker), and a demo run the server made under other rules."""
    gpu = Hardware.objects.create(slug="h100", name="H100", kind=Hardware.Kind.GPU)
    imported = Run.objects.create(
        model=LanguageModel.objects.create(name="Model B"), problem_set=run.problem_set, hardware=gpu,
        setting="multi-turn", turns=3, origin=Origin.IMPORTED, notes="from a zip\nline two", created_by=ingestor,
        published_source="KernelBench leaderboard", name="B, imported",
    )  # fmt: skip
    rules = ScoringRules.objects.create(slug="strict", name="Strict", fp32_tolerance=1e-5, fp16_tolerance=0.001,
                                        bf16_tolerance=0.015625, correctness_trials=7)  # fmt: skip
    Run.objects.create(model=run.model, problem_set=run.problem_set, hardware=gpu, is_demo=True, rules=rules)
    when = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    for number, evaluation in enumerate(Evaluation.objects.filter(kernel__run=run)):  # finished, a second apart
        Evaluation.objects.filter(pk=evaluation.pk).update(finished_at=when - timedelta(seconds=number))
    for index, problem in enumerate(run.problem_set.problems.order_by("pk")):
        kernel = Kernel.objects.create(run=imported, problem=problem, source=KERNEL, submitted_by=ingestor,
                                       sample_index=index, backend="triton" if index else "cuda",
                                       published_speedup=[1.25, None, 3.0][index],
                                       published_hardware=["L40S", "", ""][index])  # fmt: skip
        Kernel.objects.filter(pk=kernel.pk).update(created_at=when + timedelta(days=index, seconds=index))
        _evaluations(kernel, gpu, when, index)


def _evaluations(kernel: Kernel, hardware: Hardware, when: datetime, index: int) -> None:
    if index == 2:
        return  # never evaluated: no latest evaluation
    done = Evaluation.objects.create(
        kernel=kernel, hardware=hardware, origin=Origin.IMPORTED, state=Evaluation.State.DONE,
        status=Evaluation.Status.CORRECT, compiled=True, correct=True, speedup=1.0 / 3, speedup_low=0.3,
        speedup_high=0.4, kernel_ms=0.125, reference_ms=12.0, kernel_timing={"mean": 0.125, "runs": [1, 2]},
        trials_passed=5, trials_total=5, flags=["high_speedup", "ümlaut"], notes=[{"code": "n", "text": "é"}],
        error=f"RuntimeError on {WORKER}", worker_name=WORKER, attempts=2,
        failure_reason=f"attempt 1 on {WORKER}: lost; attempt 2 on gpu-host-9.1.ab: ok",
    )  # fmt: skip
    Evaluation.objects.filter(pk=done.pk).update(queued_at=when, started_at=when, finished_at=when + timedelta(1))
    queued = Evaluation.objects.create(kernel=kernel, hardware=hardware, origin=Origin.MEASURED)
    kernel.latest_evaluation = queued if index else done
    kernel.save(update_fields=["latest_evaluation"])


def _users() -> list[User | None]:
    ingestor = User.objects.get(username="ingestor")
    staff = User.objects.create_user("staffer", is_staff=True)
    admin = User.objects.create_superuser("admin", "admin@example.com", None)
    return [None, User.objects.get(username="visitor"), ingestor, staff, admin, User.objects.get(username="reviewer")]


@pytest.fixture
def from_serializers(monkeypatch):
    """Asks a URL with the lists written by their serializers (DRF's ListModelMixin.list)."""

    def ask(client, url: str):
        with monkeypatch.context() as patch:
            for viewset in (EvaluationViewSet, RunViewSet, KernelViewSet):
                patch.setattr(viewset, "list_values", ())
            return client.get(url)

    return ask


def test_the_rows_are_the_serializers_byte_for_byte(varied, visitor, reviewer, token_client, from_serializers):
    for user in _users():
        client = token_client(user)
        for url in URLS:
            rows, serialized = client.get(url), from_serializers(client, url)
            assert rows.status_code == serialized.status_code == 200, (url, user)
            assert rows.content == serialized.content, (url, user)
    assert (
        Evaluation.objects.filter(worker_name=WORKER).exists()
        and Kernel.objects.filter(latest_evaluation=None).exists()
    )


def test_the_rows_keep_the_current_time_zone_and_the_errors(varied, client, from_serializers):
    with timezone.override("America/Sao_Paulo"):
        for url in ("/api/v1/evaluations/", "/api/v1/runs/", "/api/v1/kernels/"):
            rows, serialized = client.get(url), from_serializers(client, url)
            assert rows.content == serialized.content and b"-03:00" in rows.content, url
    for url in ("/api/v1/kernels/?page=99", "/api/v1/runs/?origin=nonsense", "/api/v1/evaluations/?kernel=x"):
        rows, serialized = client.get(url), from_serializers(client, url)
        assert rows.status_code == serialized.status_code != 200 and rows.content == serialized.content, url


def test_a_list_reads_its_rows_in_one_query(varied, client, django_assert_num_queries):
    client.get("/api/v1/evaluations/")  # counted, and the count kept
    for url in ("/api/v1/evaluations/", "/api/v1/runs/", "/api/v1/kernels/"):
        client.get(url)
        with django_assert_num_queries(1):
            assert client.get(url).status_code == 200


def test_each_filter_is_counted_apart_and_its_pages_share_the_count(varied, client, django_assert_num_queries):
    # The total is cached under the list's path and parameters (not the compiled query): a key that
    # left out a filter would hand one filter's total to another.
    for backend in ("triton", "cuda", "cpp"):
        expected = Kernel.objects.filter(backend=backend).count()
        assert client.get(f"/api/v1/kernels/?backend={backend}").json()["count"] == expected, backend
    assert client.get("/api/v1/kernels/").json()["count"] == Kernel.objects.count()
    with django_assert_num_queries(1):  # the same filter, another page size: its count is the one kept
        page = client.get("/api/v1/kernels/?page_size=1&backend=triton").json()
    assert page["count"] == Kernel.objects.filter(backend="triton").count() > 1
