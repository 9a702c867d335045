"""Issue 19's work-budget repros (cases 2, 3, 9, 10, 11) against a live site, in the shape of
live_site.py's cases: each returns (responses, what they must show, a check per response[, a note,
an overall check]). Replayed by tests/integration/test_hardening_live.py and
benchmarks/hardening_replay.py after issue 12's.

seed_budgets() writes what the cases need before the replay (the row counts of each case must not
move): its own users (the write limit counts per user) and the issue's two 800-line kernels."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import redis
import requests

from tests.budgets import amplified_run_zip
from tests.integration.live_site import _api

# Issue 19, case 2: two 800-line kernels of one problem, `x = 1` against `x = 1 / y = 2`.
REPETITIVE = ("import torch\n" + "x = 1\n" * 800, "import torch\n" + "x = 1\ny = 2\n" * 400)
USERS = ("b19-bodies", "b19-zips")


def seed_budgets(data: dict) -> dict:
    """Users with tokens (Ingestors), and the two repetitive kernels; `data` with their ids added."""
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from leaderboard.models import Kernel

    ingestors = Group.objects.get(name="Ingestors")
    tokens = dict(data["tokens"])
    for name in USERS:
        user = User.objects.create_user(name)
        user.groups.add(ingestors)
        tokens[name] = Token.objects.create(user=user).key
    first = Kernel.objects.get(pk=data["kernel"])
    repetitive = [
        Kernel.objects.create(run=first.run, problem=first.problem, sample_index=index, source=source).pk
        for index, source in enumerate(REPETITIVE, start=1)
    ]
    return {**data, "tokens": tokens, "repetitive": repetitive}


def _timed_get(url: str) -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = requests.get(url, timeout=120)
    return response, time.monotonic() - started


def case_19_2_cubic_diff(site, data):
    """Eight anonymous visitors at once ask for the diff that took 20.9 s each; then /healthz."""
    first, second = data["repetitive"]
    url = f"{site.url}/kernels/{first}/?against={second}"
    with ThreadPoolExecutor(8) as pool:
        timed = list(pool.map(_timed_get, [url] * 8))
    health = requests.get(site.url + "/healthz", timeout=10)
    slowest = max(seconds for _, seconds in timed)
    note = f"8 at once: slowest {slowest:.2f} s; /healthz {health.status_code}"
    return (
        [r for r, _ in timed],
        "200, both sources shown unaligned (too different to line up)",
        lambda r: r.status_code == 200 and "differ in too many places" in r.text,
        note,
        health.status_code == 200,
    )


def case_19_3_quadratic_json(site, data):
    """20,000 keys in 209 KB to the reports route; a 2.8 MB run body of 40,000 kernels."""
    api = _api(site, data["tokens"]["b19-bodies"])
    keys = "{" + ",".join(f'"key-{i}": {i}' for i in range(20_000)) + ', "reason": "x"}'
    kernels = {f"level_1_problem_1_sample_{i}_kernel.py": "x" for i in range(40_000)}
    run = json.dumps({"model": "M", "hardware": "cpu", "problem_set": "starter-v1", "kernels": kernels})
    started = time.monotonic()
    responses = [
        api.post(
            f"{site.url}/api/v1/kernels/{data['kernel']}/reports/",
            data=keys,
            headers={"Content-Type": "application/json"},
        ),
        api.post(site.url + "/api/v1/runs/import/", data=run, headers={"Content-Type": "application/json"}),
    ]
    note = f"{time.monotonic() - started:.2f} s for both"
    return (
        responses,
        "413 naming the body limit; 400 naming the 20000-kernel limit",
        lambda r: (
            (r.status_code == 413 and "the limit here is" in r.text)
            or (r.status_code == 400 and "the limit is 20000" in r.text)
        ),
        note,
        [r.status_code for r in responses] == [413, 400],
    )


def case_19_9_zip_amplification(site, data):
    """246 KB of zip, 200 kernels of 999 KB each (mostly spaces)."""
    api = _api(site, data["tokens"]["b19-zips"])
    fields = {"model": "M", "hardware": "cpu", "problem_set": "starter-v1"}
    started = time.monotonic()
    responses = [
        api.post(site.url + "/api/v1/runs/import/", data=fields, files={"file": ("run.zip", amplified_run_zip())})
    ]
    note = f"{time.monotonic() - started:.2f} s"
    return (
        responses,
        "400 naming the inflated-size limit",
        lambda r: r.status_code == 400 and "the limit is 50 times the archive's" in r.text,
        note,
        True,
    )


def case_19_10_junk_parameters(site, data):
    """200 anonymous board requests, each with a junk parameter: the cache holds one entry more."""
    cache = redis.Redis.from_url(site.env.get("CACHE_REDIS_URL") or site.env["REDIS_URL"])
    requests.get(site.url + "/levels/all/", timeout=30)
    before, used_before = cache.dbsize(), cache.info("memory")["used_memory"]
    responses = [requests.get(f"{site.url}/levels/all/?junk={i}&utm_source=x{i}", timeout=30) for i in range(200)]
    after, used_after = cache.dbsize(), cache.info("memory")["used_memory"]
    note = f"cache keys {before} -> {after}; Redis used_memory {used_before} -> {used_after} bytes"
    return responses, "200 from one cache entry", lambda r: r.status_code == 200, note, after <= before + 1


def case_19_11_hardware_rename(site, data):
    """A board cached and validated, then the hardware renamed: within BOARD_FRESHNESS_SECONDS the
    old copy gets a 200 with the new name, not a 304 or a cached 200 with the old one. (Before the
    fix nothing told the boards: the old name stayed until the cache expired, ten minutes.)"""
    from django.conf import settings

    from problems.models import Hardware

    first = requests.get(site.url + "/levels/all/", timeout=30)
    hardware = Hardware.objects.get(slug="cpu")
    old_name, hardware.name = hardware.name, "CPU renamed"
    hardware.save()
    started, bound = time.monotonic(), settings.BOARD_FRESHNESS_SECONDS + settings.BOARD_REBUILD_SECONDS + 5
    try:
        while True:
            again = requests.get(
                site.url + "/levels/all/", headers={"If-None-Match": first.headers["ETag"]}, timeout=30
            )
            if (again.status_code == 200 and "CPU renamed" in again.text) or time.monotonic() - started > bound:
                break
            time.sleep(0.25)
        shown_after = time.monotonic() - started
    finally:
        hardware.name = old_name
        hardware.save()
    note = f"new name shown {shown_after:.1f} s after the rename (bound {bound} s)"
    return (
        [first, again],
        "200, then within the freshness bound a 200 with the new name",
        lambda r: r.status_code == 200,
        note,
        "CPU renamed" in again.text and again.headers["ETag"] != first.headers["ETag"],
    )


BUDGET_CASES: list[Callable] = [
    case_19_2_cubic_diff,
    case_19_3_quadratic_json,
    case_19_9_zip_amplification,
    case_19_10_junk_parameters,
    case_19_11_hardware_rename,
]
