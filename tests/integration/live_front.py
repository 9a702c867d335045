"""Issue 19's cases 4, 5, 7, 10, 12, 13, 14 and 15 (the front: forged addresses, slow clients,
what replies disclose, Redis apart, the client, control characters, control sockets), replayed by
benchmarks/hardening_replay.py. The cases that need the site use the replay's LiveSite (gunicorn,
4 workers, TRUSTED_PROXY_COUNT unset so 0); case 5 starts its own fronts (front_site.py); case
12 runs `kbl` against tests/hostile_site.py. The site needs SITE_ENV: loopback is not a private
network there, so the replay sees /metrics and /healthz as a visitor would.
"""

from __future__ import annotations

import subprocess
import sys

import requests
import yaml

from tests.hostile_site import hostile_site
from tests.integration.front_site import Front, SlowClients, control_socket_owners, probe_healthz
from tests.integration.live_site import REPO, LiveSite, Outcome, _api

SITE_ENV = {"PRIVATE_NETWORKS": "10.255.255.0/24"}
PASSWD = "root:x:0:0:root:/root:/bin/bash"
WORKER = "gpu-host-7.4242.ab12"
HOSTILE_NAME = "M\x1b]0;pwned\x07\x1b[2J"


def seed_front(data: dict) -> dict:
    """An Ingestor of its own (the write limit counts per user), and the seeded kernel's evaluation
    carrying what a hostile kernel would print and what a worker records. Run after live_site.seed."""
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    from leaderboard.models import Evaluation, Kernel

    user = User.objects.create_user("f19-ingestor")
    user.groups.add(Group.objects.get(name="Ingestors"))
    evaluation = Kernel.objects.get(pk=data["kernel"]).latest_evaluation_id
    Evaluation.objects.filter(pk=evaluation).update(
        log=f"--- kernel process output ---\n{PASSWD}\n", worker_name=WORKER,
        environment={"device_name": "cpu", "uid": 61001, "hidden_paths": ["/srv/kernelbench/var"]},
    )  # fmt: skip
    return {"token": Token.objects.create(user=user).key, "evaluation": evaluation}


def case19_4_forged_forwarded_for(site: LiveSite, data: dict) -> Outcome:
    """Anonymous sign-ins, a new X-Forwarded-For and username each, at API_WRITE_RATE=10/min."""
    browser = requests.Session()
    token = browser.get(site.url + "/sign-in/", timeout=30).cookies["csrftoken"]
    replies = [
        browser.post(site.url + "/sign-in/", data={"username": f"u{i}", "password": "x", "csrfmiddlewaretoken": token},
                     headers={"X-Forwarded-For": f"198.51.100.{i}"}, timeout=30)
        for i in range(14)
    ]  # fmt: skip
    accepted = sum(r.status_code != 429 for r in replies)
    return Outcome("19.4 new X-Forwarded-For per sign-in", [r.status_code for r in replies], "429 after 10",
                   accepted <= 10 and replies[-1].status_code == 429, True, f"{accepted} of 14 let through")  # fmt: skip


def case19_5_slow_clients(site: LiveSite, data: dict) -> Outcome:
    """40 clients trickling headers; /healthz probed 5 times (3 s each) through the shipped nginx,
    and, for contrast, at gunicorn alone (site/gunicorn.conf.py, 2 workers x 2 threads)."""
    seconds = {}
    for proxy in (False, True):
        front = Front({"DJANGO_SETTINGS_MODULE": "config.settings", "ALLOWED_HOSTS": "127.0.0.1"}, proxy=proxy).start()
        try:
            with SlowClients(front.url, n=40):
                seconds[proxy] = probe_healthz(front.url, probes=5, timeout=3.0)
        finally:
            front.stop()
    note = f"behind nginx: {seconds[True]} s; gunicorn alone: {seconds[False]} (None: no answer in 3 s)"
    return Outcome("19.5 slowloris, 40 clients", [200 if s else 0 for s in seconds[True]], "every probe answers",
                   None not in seconds[True], True, note)  # fmt: skip


def case19_7_14_disclosure(site: LiveSite, data: dict) -> Outcome:
    """Anonymous: the evaluation without log, worker or sandbox details; /metrics refused; /healthz
    without timings."""
    detail = requests.get(f"{site.url}/api/v1/evaluations/{data['front']['evaluation']}/", timeout=30)
    page = requests.get(f"{site.url}/kernels/{data['kernel']}/", timeout=30)
    metrics = requests.get(site.url + "/metrics", timeout=30)
    health = requests.get(site.url + "/healthz", timeout=30)
    leaks = [s for s in (PASSWD, WORKER, "61001", "/srv/kernelbench") for r in (detail, page) if s in r.text]
    ok = (detail.json().get("withheld") == ["log", "error"] and not leaks and metrics.status_code == 403
          and all(set(check) == {"ok"} for check in health.json()["checks"].values()))  # fmt: skip
    return Outcome("19.7+14 logs, host details, metrics", [detail.status_code, page.status_code, metrics.status_code,
                   health.status_code], "200 withheld, 200, 403, 200 without timings", ok, True, f"leaks: {leaks}")  # fmt: skip


def case19_10_redis_apart(site: LiveSite, data: dict) -> Outcome:
    """The shipped compose: the queue's Redis never evicts, the cache's is bounded and LRU, and the
    web's cache points at the cache's."""
    services = yaml.safe_load((REPO / "site" / "compose.yaml").read_text())["services"]
    queue, cache = " ".join(services["redis"]["command"]), " ".join(services["redis-cache"]["command"])
    web = services["web"]["environment"]["CACHE_REDIS_URL"]
    ok = "noeviction" in queue and "allkeys-lru" in cache and "--maxmemory " in cache and "@redis-cache:" in web
    return Outcome("19.10 queue and cache Redis apart", [], "noeviction / maxmemory + allkeys-lru", ok, True,
                   f"queue: {queue.split('--requirepass')[0].strip()}; cache: {cache.split('--requirepass')[0].strip()}")  # fmt: skip


def _kbl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbl", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def case19_12_client(site: LiveSite, data: dict) -> Outcome:
    """kbl with a token, redirected to another origin; then a reply of the wrong shape."""
    with hostile_site() as (other, other_seen), hostile_site(elsewhere=other) as (home, _seen):
        _kbl("status", "1", "--url", home + "/redirect-away", "--token", "s3cret")
    with hostile_site(b"<html>502 Bad Gateway</html>") as (home, _seen):
        broken = _kbl("status", "1", "--url", home, "--token", "s3cret")
    ok = other_seen == [None] and broken.returncode == 3 and "Traceback" not in broken.stderr
    return Outcome("19.12 kbl token on redirect, bad reply", [broken.returncode], "no token elsewhere; exit 3", ok, True,
                   f"other origin saw {other_seen}; {broken.stderr.strip()[:90]}")  # fmt: skip


def case19_13_control_characters(site: LiveSite, data: dict) -> Outcome:
    api = _api(site, data["front"]["token"])
    fields = {"model": HOSTILE_NAME, "hardware": "cpu", "problem_set": "starter-v1"}
    files = {"kernels": {"level_1_problem_1_sample_0_kernel.py": "class ModelNew: pass\n"}}
    row = {"model": "M\u202eevil", "variant": "v", "metric": "fast_1", "value": 4, "unit": "%", "date": "2025-02-14",
           "source_url": "https://example.org/a"}  # fmt: skip
    replies = [
        api.post(site.url + "/api/v1/runs/import/", json={**fields, **files}, timeout=30),
        api.post(site.url + "/api/v1/runs/import/", json={**fields, "model": "M", "setting": "s\x9b2J", **files}, timeout=30),
        api.post(site.url + "/api/v1/reported-scores/", json=row, timeout=30),
    ]  # fmt: skip
    named = ["model" in replies[0].text, "setting" in replies[1].text, "model contains" in replies[2].text]
    return Outcome("19.13 control characters in names", [r.status_code for r in replies], "400 naming the field",
                   all(r.status_code == 400 for r in replies) and all(named), True, "", [r.text[:300] for r in replies])  # fmt: skip


def case19_15_control_sockets(site: LiveSite, data: dict) -> Outcome:
    started, answering = control_socket_owners()
    return Outcome("19.15 two gunicorns, control sockets", [], "each socket answers its own master",
                   answering == started, True, f"masters {started}, sockets answered {answering}")  # fmt: skip


FRONT_CASES = [case19_4_forged_forwarded_for, case19_7_14_disclosure, case19_13_control_characters,
               case19_12_client, case19_10_redis_apart, case19_15_control_sockets, case19_5_slow_clients]  # fmt: skip


def replay_front(site: LiveSite, data: dict) -> list[Outcome]:
    """Every case above (`data` from live_site.seed, with seed_front's under "front")."""
    outcomes = []
    for case in FRONT_CASES:
        try:
            outcomes.append(case(site, data))
        except Exception as exc:  # noqa: BLE001 - a case that breaks is reported, not fatal to the others
            outcomes.append(Outcome(case.__name__, [], "", False, True, f"{type(exc).__name__}: {exc}"[:200]))
    return outcomes
