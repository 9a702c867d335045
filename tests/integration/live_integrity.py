"""Issue 19's cases 1, 6 and 8 and issue 20's cases 3 and 4, replayed against a live site (gunicorn
with several workers, the database of the replay process) by benchmarks/hardening_replay.py.

Each case returns an Outcome (tests/integration/live_site.py): the statuses, whether each reply is
the safe one, and, in `counts_unchanged`, the case's own check that nothing was written that must
not be (the stored kernel untouched, nothing queued, no partial import, one set of evaluations).
The site needs EVAL_MAX_PENDING_PER_USER and KERNEL_SOURCE_MAX_BYTES_PER_USER as in SITE_ENV.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import requests

from tests.integration.live_site import KERNEL, LiveSite, Outcome, _api, _browser
from tests.rescoring import run_rescorer

SITE_ENV = {"EVAL_MAX_PENDING_PER_USER": "40", "KERNEL_SOURCE_MAX_BYTES_PER_USER": "300000"}
USERS = ("owner", "intruder", "quota", "racer", "importer")
ZEROS = KERNEL.replace("return a @ b", "return torch.zeros(a.shape[0], b.shape[1])")
CLAIMS = {"1": {"sample_id": 0, "compiled": True, "correctness": True, "runtime": 1.0}}


def seed_integrity() -> dict:
    """Users for these cases (Ingestors; a reviewer; an admin), a demo run, an H200, their tokens
    and sessions. Run after live_site.seed (which makes the problem set and the Ingestors group)."""
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.backends.db import SessionStore
    from rest_framework.authtoken.models import Token

    from leaderboard.models import LanguageModel, Origin, Run
    from problems.models import Hardware, ProblemSet

    ingestors = Group.objects.get(name="Ingestors")
    tokens, sessions = {}, {}
    for name in USERS:
        user = User.objects.create_user(f"i19-{name}")
        user.groups.add(ingestors)
        tokens[name] = Token.objects.create(user=user).key
        session = SessionStore()
        session.update(
            {
                "_auth_user_id": str(user.pk),
                "_auth_user_hash": user.get_session_auth_hash(),
                "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
            }
        )
        session.create()
        sessions[name] = session.session_key
    reviewer = User.objects.create_superuser("i19-reviewer")
    Hardware.objects.create(slug="h200", name="H200", kind=Hardware.Kind.GPU)
    demo = Run.objects.create(
        model=LanguageModel.objects.create(name="Demo model", is_demo=True),
        problem_set=ProblemSet.objects.get(),
        hardware=Hardware.objects.get(slug="cpu"),
        origin=Origin.DEMO,
        is_demo=True,
        name="demo run",
    )
    return {"tokens": tokens, "sessions": sessions, "reviewer": reviewer.pk, "demo_run": demo.pk}


def _run_body(model: str, name: str, files: dict[str, str], results: dict | None = None) -> dict:
    body = {"model": model, "hardware": "cpu", "problem_set": "starter-v1", "name": name, "kernels": files}
    return {**body, "eval_results": results} if results is not None else body


def _samples(n: int, size: int = 0) -> dict[str, str]:
    """n kernels of problem 1 (samples 0..n-1), each padded to about `size` bytes."""
    return {f"level_1_problem_1_sample_{s}_kernel.py": KERNEL + f"# {s}\n" + "#" * size for s in range(n)}


def _measure_and_approve(evaluation_id: int, reviewer_id: int) -> None:
    """What a worker and a reviewer do: a correct evaluation at 3x, then a clean verdict."""
    from django.contrib.auth.models import User

    from leaderboard.evaluations.attempts import claim, store_result
    from leaderboard.models import Evaluation
    from leaderboard.reviews.services import record_verdict

    store_result(
        claim(evaluation_id, "replay.1"), {"status": "correct", "correct": True, "compiled": True, "speedup": 3.0}
    )
    record_verdict(Evaluation.objects.get(pk=evaluation_id).kernel, "clean", by=User.objects.get(pk=reviewer_id))


def _kernel_state(kernel_id: int) -> tuple:
    from leaderboard.models import Kernel, RunScore

    run_rescorer()
    kernel = Kernel.objects.get(pk=kernel_id)
    scores = list(RunScore.objects.filter(run_id=kernel.run_id).order_by("pk").values_list("s0_correct", "s0_speedups"))
    return kernel.source_hash, kernel.latest_evaluation_id, kernel.review_verdict, scores


def case19_1_reimport_swaps_source(site: LiveSite, data: dict):
    api = _api(site, data["tokens"]["owner"])
    url = site.url + "/api/v1/runs/import/"
    files = {"level_1_problem_1_sample_0_kernel.py": KERNEL}
    first = api.post(url, json=_run_body("Case one model", "case-1", files, CLAIMS), timeout=60)
    run_id = first.json()["run"]["id"]
    verify = api.post(f"{site.url}/api/v1/runs/{run_id}/verify/", timeout=60)
    evaluation_id = verify.json()["evaluations"][0]
    _measure_and_approve(evaluation_id, data["reviewer"])
    from leaderboard.models import Evaluation

    kernel_id = Evaluation.objects.get(pk=evaluation_id).kernel_id
    before = _kernel_state(kernel_id)
    swap = api.post(
        url, json=_run_body("Case one model", "case-1", {**files, next(iter(files)): ZEROS}, CLAIMS), timeout=60
    )
    kept = _kernel_state(kernel_id) == before and swap.json()["run"]["id"] != run_id
    checks = {first: 201, verify: 202, swap: 201}
    return Outcome(
        "19.1 re-import swaps a verified source",
        [r.status_code for r in checks],
        "201, 202, 201 (a new run)",
        all(r.status_code == s for r, s in checks.items()) and site.healthy(),
        kept,
        "old kernel, its evaluation, verdict and board row unchanged" if kept else "old kernel changed",
        [swap.text[:300]],
    )


def case19_6_others_runs(site: LiveSite, data: dict):
    owner, intruder = _api(site, data["tokens"]["owner"]), _api(site, data["tokens"]["intruder"])
    from leaderboard.models import Evaluation, Kernel, Run

    problem = Kernel.objects.values_list("problem_id", flat=True).first()
    mine = owner.post(
        site.url + "/api/v1/submissions/",
        json={"problem": problem, "source": KERNEL, "hardware": "cpu", "model": "case-one-model"},
        timeout=60,
    )
    owners_run = mine.json()["run"]
    before = (Kernel.objects.count(), Evaluation.objects.filter(state__in=["queued", "running"]).count())
    responses = [
        intruder.post(
            site.url + "/api/v1/submissions/",
            json={"problem": problem, "source": KERNEL, "run": owners_run},
            timeout=60,
        ),
        intruder.post(f"{site.url}/api/v1/runs/{owners_run}/verify/", timeout=60),
        intruder.post(f"{site.url}/api/v1/runs/{data['demo_run']}/verify/", timeout=60),
        owner.post(
            site.url + "/api/v1/submissions/",
            json={"problem": problem, "source": KERNEL, "run": owners_run, "hardware": "h200"},
            timeout=60,
        ),
    ]
    form = _browser(site, data["sessions"]["intruder"]).get(f"{site.url}/problems/{problem}/submit/", timeout=60)
    untouched = before == (Kernel.objects.count(), Evaluation.objects.filter(state__in=["queued", "running"]).count())
    expected = [400, 403, 403, 400]
    ok = [r.status_code for r in responses] == expected and f'value="{owners_run}"' not in form.text
    ok = ok and Run.objects.get(pk=owners_run).kernels.count() == 1 and site.healthy()
    return Outcome(
        "19.6 writes into others' runs",
        [r.status_code for r in responses],
        "400, 403, 403, 400",
        ok,
        untouched,
        "form lists only one's own runs" if ok else "",
        [r.text[:200] for r in responses],
    )


def case19_8_quotas(site: LiveSite, data: dict):
    api = _api(site, data["tokens"]["quota"])
    from leaderboard.models import Evaluation, Kernel, Run

    url = site.url + "/api/v1/runs/import/"
    imported = api.post(url, json=_run_body("Quota model", "case-8", _samples(50)), timeout=60)
    run_id = imported.json()["run"]["id"]
    kernels = Kernel.objects.count()
    verify = api.post(f"{site.url}/api/v1/runs/{run_id}/verify/", timeout=60)
    big = api.post(url, json=_run_body("Quota model", "case-8-big", _samples(40, 10_000)), timeout=60)
    nothing = (
        not Evaluation.objects.filter(kernel__run_id=run_id).exists()
        and Kernel.objects.count() == kernels
        and not Run.objects.filter(name="case-8-big").exists()
    )
    ok = (
        verify.status_code == 429
        and "EVAL_MAX_PENDING_PER_USER" in verify.text
        and "limit is 40" in verify.text
        and big.status_code == 409
        and "KERNEL_SOURCE_MAX_BYTES_PER_USER" in big.text
        and site.healthy()
    )
    return Outcome(
        "19.8 per-user quotas",
        [verify.status_code, big.status_code],
        "429 (evaluations), 409 (bytes)",
        ok,
        nothing,
        "each names its quota and numbers; nothing written",
        [verify.text[:300], big.text[:300]],
    )


def _at_once(calls: list[Callable[[], requests.Response]]) -> list[requests.Response]:
    barrier, replies = threading.Barrier(len(calls)), [None] * len(calls)

    def go(i: int) -> None:
        barrier.wait()
        replies[i] = calls[i]()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return replies


def case20_3_concurrent_verify(site: LiveSite, data: dict):
    token = data["tokens"]["racer"]
    api = _api(site, token)
    run_id = api.post(
        site.url + "/api/v1/runs/import/", json=_run_body("Racer model", "case-20-3", _samples(20)), timeout=60
    ).json()["run"]["id"]
    url = f"{site.url}/api/v1/runs/{run_id}/verify/"
    replies = _at_once([lambda: _api(site, token).post(url, timeout=60) for _ in range(2)])
    from leaderboard.models import Evaluation

    rows = Evaluation.objects.filter(kernel__run_id=run_id).count()
    bodies = sorted((r.json().get("queued"), r.json().get("skipped")) for r in replies if r.status_code == 202)
    progress = requests.get(f"{site.url}/api/v1/runs/{run_id}/progress/", timeout=60).json()
    ok = bodies == [(0, 20), (20, 0)] and progress["label"] == "0 of 20 kernels evaluated, 20 queued"
    return Outcome(
        "20.3 two concurrent verifies",
        [r.status_code for r in replies],
        "202 queued 20, 202 skipped 20",
        ok and site.healthy(),
        rows == 20,
        f"{rows} evaluations for 20 kernels; {progress['label']}",
        [r.text[:200] for r in replies],
    )


def case20_4_concurrent_new_model(site: LiveSite, data: dict):
    token = data["tokens"]["importer"]
    body = _run_body("Brand new model", "case-20-4", _samples(3))
    replies = _at_once(
        [lambda: _api(site, token).post(site.url + "/api/v1/runs/import/", json=body, timeout=60) for _ in range(5)]
    )
    from leaderboard.models import LanguageModel, Run

    one = (
        LanguageModel.objects.filter(name="Brand new model").count() == 1
        and Run.objects.filter(name="case-20-4").count() == 1
    )
    ok = all(r.status_code in (200, 201) for r in replies) and site.healthy()
    return Outcome(
        "20.4 five imports naming a new model",
        sorted(r.status_code for r in replies),
        "all 2xx",
        ok,
        one,
        "one model, one run" if one else "duplicates",
        [r.text[:200] for r in replies if r.status_code >= 300],
    )


CASES: list[Callable] = [
    case19_1_reimport_swaps_source,
    case19_6_others_runs,
    case19_8_quotas,
    case20_3_concurrent_verify,
    case20_4_concurrent_new_model,
]


def replay_integrity(site: LiveSite, data: dict) -> list[Outcome]:
    return [case(site, data) for case in CASES]
