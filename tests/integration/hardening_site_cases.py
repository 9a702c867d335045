"""Issue 28's site cases (1, 5, 6, 7, 9, 10) against a live site, replayed by
benchmarks/hardening_replay.py and tests/integration/test_hardening_site_live.py after issue 19's.
Each case returns an Outcome (live_site.py): whether it held, and whether the rows stayed as they
must (cases 1, 9: nothing written; case 7 writes its imports and checks what they made).

Cases 5 and 6 start a site of their own (gunicorn, the same database) beside the replay's, shaped
as production is: the cache in a Redis of its own with a small maxmemory and allkeys-lru, the
queue's Redis (where the counters live) apart, and nginx's X-Forwarded-For trusted
(TRUSTED_PROXY_COUNT=1), so that clients at several addresses can be played."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import redis
import requests

from tests.integration.live_site import (
    KERNEL,
    LiveSite,
    Outcome,
    _api,
    free_port,
    row_counts,
    stop_processes,
    wait_for_port,
)

PASSWORD = "h28-a-long-pass-9Xq!"
HACK = KERNEL + "        # returns a @ b\n"
USERS = ("h28-numbers", "h28-owner", "h28-other", "h28-names")


def seed_site(data: dict) -> dict:
    """Ingestors with tokens, a reviewer with a token, two users with passwords; after live_site.seed."""
    from django.contrib.auth.models import Group, Permission, User
    from rest_framework.authtoken.models import Token

    from leaderboard.models import Kernel

    ingestors = Group.objects.get(name="Ingestors")
    tokens = {}
    for name in USERS:
        user = User.objects.create_user(name)
        user.groups.add(ingestors)
        tokens[name] = Token.objects.create(user=user).key
    reviewer = User.objects.create_user("h28-reviewer")
    reviewer.user_permissions.add(Permission.objects.get(content_type__app_label="leaderboard", codename="add_review"))
    tokens["h28-reviewer"] = Token.objects.create(user=reviewer).key
    for name in ("h28-admin", "h28-owner6"):
        User.objects.create_user(name, password=PASSWORD, is_staff=True)
    evaluation = Kernel.objects.get(pk=data["kernel"]).latest_evaluation_id
    return {**data, "site_tokens": tokens, "evaluation": evaluation}


def _run_body(run_name: str, source: str = KERNEL, runtime: float | None = None, **fields) -> dict:
    body = {"model": "M28", "hardware": "cpu", "problem_set": "starter-v1", "name": run_name, **fields,
            "kernels": {"level_1_problem_1_sample_0_kernel.py": source}}  # fmt: skip
    if runtime is not None:
        body["eval_results"] = {"1": [{"sample_id": 0, "compiled": True, "correctness": True, "runtime": runtime}]}
    return body


BOARD_PAGES = ["/", "/levels/all/", "/levels/1/", "/api/v1/leaderboard/", "/api/v1/runs/", "/api/v1/kernels/",
               "/api/v1/evaluations/"]  # fmt: skip


def case28_1_tiny_runtime(site: LiveSite, data: dict) -> Outcome:
    """Runtimes of 4e-320, 5e-324, 1e-308 and 1e-300 ms on a problem with an eager baseline; then
    every board and API page, and /healthz."""
    api = _api(site, data["site_tokens"]["h28-numbers"])
    before = row_counts()
    imports = [api.post(site.url + "/api/v1/runs/import/", json=_run_body("tiny", runtime=runtime), timeout=60)
               for runtime in (4e-320, 5e-324, 1e-308, 1e-300)]  # fmt: skip
    pages = [requests.get(site.url + path, timeout=60) for path in BOARD_PAGES]
    health = requests.get(site.url + "/healthz", timeout=30).json()
    refused = all(r.status_code == 400 and "under the physical floor" in r.text for r in imports)
    ok = refused and all(r.status_code == 200 for r in pages) and health["boards"]["ok"] is True
    note = f"imports {[r.status_code for r in imports]}; pages {[r.status_code for r in pages]}; /healthz {health['status']}"
    return Outcome("28.1 runtime 4e-320 (infinite speedup)", [r.status_code for r in imports + pages],
                   "400 naming the floor; every page 200", ok, before == row_counts(), note,
                   [r.text[:300] for r in imports])  # fmt: skip


def _redis(port: int, *extra: str, workdir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(workdir), *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_port(port, proc)
    return proc


def _sign_in(site_url: str, username: str, password: str, address: str) -> int:
    browser = requests.Session()
    token = browser.get(site_url + "/sign-in/", timeout=120).cookies["csrftoken"]
    reply = browser.post(
        site_url + "/sign-in/", data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"X-Forwarded-For": address}, allow_redirects=False, timeout=120,
    )  # fmt: skip
    return reply.status_code


class ProductionShaped:
    """A second site on the replay's database: a 4 MB allkeys-lru cache Redis apart from the queue's."""

    def __init__(self, site: LiveSite):
        self.workdir = Path(tempfile.mkdtemp(prefix="kb-h28-"))
        self.cache_port = free_port()
        keep = ("DATABASE_URL", "KB_VAR_DIR", "DJANGO_SETTINGS_MODULE", "SECRET_KEY", "PRIVATE_NETWORKS")
        self.env = {name: site.env[name] for name in keep if name in site.env}
        self.env.update({"CACHE_REDIS_URL": f"redis://127.0.0.1:{self.cache_port}/0", "TRUSTED_PROXY_COUNT": "1",
                         "API_WRITE_RATE": "1000/min"})  # fmt: skip
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> ProductionShaped:
        self.procs.append(_redis(self.cache_port, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru",
                                 workdir=self.workdir))  # fmt: skip
        self.site = LiveSite(self.workdir, self.env, workers=2).start()
        self.cache = redis.Redis(port=self.cache_port)
        for _ in range(2):  # each worker's first request imports the URLconf's views: slow on a busy host
            requests.get(self.site.url + "/sign-in/", headers={"Connection": "close"}, timeout=300)
        return self

    def __exit__(self, *exc) -> None:
        self.site.stop()
        stop_processes(self.procs)


def case28_5_counters_survive_eviction(site: LiveSite, data: dict) -> Outcome:
    """An admin's username locked from one address; 300 anonymous board GETs with new p values;
    then the cache filled past its maxmemory (evicting). The correct password from that address is
    still refused; the p values made a handful of cache entries, not 300."""
    with ProductionShaped(site) as shaped:
        url = shaped.site.url
        failures = [_sign_in(url, "h28-admin", "wrong", "198.51.100.1") for _ in range(10)]
        requests.get(url + "/levels/all/", timeout=30)
        keys_before = shaped.cache.dbsize()
        boards = [requests.get(f"{url}/levels/all/?p={1 + i / 1000:.4f}", timeout=30) for i in range(300)]
        keys_after = shaped.cache.dbsize()
        for i in range(120):  # 12 MB of what anonymous traffic stores, into a 4 MB cache
            shaped.cache.set(f"filler:{i}", b"x" * 100_000)
        evicted = shaped.cache.info("stats")["evicted_keys"]
        correct = _sign_in(url, "h28-admin", PASSWORD, "198.51.100.1")
    ok = failures[-1] == 429 and correct == 429 and evicted > 0 and keys_after - keys_before <= 8
    note = (f"failures {failures[-1]} at the 10th; cache keys {keys_before} -> {keys_after} after 300 p values; "
            f"{evicted} keys evicted; then the correct password: {correct}")  # fmt: skip
    return Outcome("28.5 counters survive cache eviction", [*failures, correct], "429 after eviction", ok and all(
        r.status_code == 200 for r in boards), True, note)  # fmt: skip


def case28_6_lockout_spares_the_owner(site: LiveSite, data: dict) -> Outcome:
    """10 anonymous failed sign-ins for one username from 10 addresses; then the owner, from an
    address with no failures, and a guessing address, both with the correct password."""
    with ProductionShaped(site) as shaped:
        url = shaped.site.url
        failures = [_sign_in(url, "h28-owner6", "wrong", f"198.51.100.{10 + i}") for i in range(10)]
        guesser = _sign_in(url, "h28-owner6", PASSWORD, "198.51.100.12")
        owner = _sign_in(url, "h28-owner6", PASSWORD, "203.0.113.5")
    ok = failures[-1] == 429 and guesser == 429 and owner == 302
    return Outcome("28.6 anonymous failures cannot lock the owner out", [*failures, guesser, owner],
                   "guessing address 429, owner's 302", ok, True,
                   f"guessing address {guesser}; owner's address {owner}")  # fmt: skip


def case28_7_revisions(site: LiveSite, data: dict) -> Outcome:
    """A kernel judged a reward hack, re-imported with only a comment changed; then another
    Ingestor's upload of the same run."""
    from leaderboard.models import Kernel, Review, Run

    tokens = data["site_tokens"]
    owner, other = _api(site, tokens["h28-owner"]), _api(site, tokens["h28-other"])
    first = owner.post(site.url + "/api/v1/runs/import/", json=_run_body("r28"), timeout=60).json()["run"]["id"]
    kernel = Kernel.objects.get(run_id=first)
    verdict = _api(site, tokens["h28-reviewer"]).post(
        f"{site.url}/api/v1/kernels/{kernel.pk}/reviews/", json={"verdict": "reward_hack", "note": "x"}, timeout=30
    )
    replies = [owner.post(site.url + "/api/v1/runs/import/", json=_run_body("r28", HACK + f"        # v{i}\n"),
                          timeout=60) for i in range(3)]  # fmt: skip
    theirs = other.post(site.url + "/api/v1/runs/import/", json=_run_body("r28", HACK + "# b\n"), timeout=60)
    revisions = [r.json()["run"]["id"] for r in replies]
    inherited = [Kernel.objects.get(run_id=pk).reviews.values_list("verdict", flat=True).first() for pk in revisions]
    # Who made a run is shown to staff and reviewers (anyone else reads "an Ingestor").
    theirs_url = f"{site.url}/api/v1/runs/{theirs.json()['run']['id']}/"
    shown = _api(site, tokens["h28-reviewer"]).get(theirs_url, timeout=30).json()
    names = list(Run.objects.filter(pk__in=revisions).order_by("pk").values_list("name", flat=True))
    ok = (verdict.status_code == 201 and inherited == [Review.Verdict.REWARD_HACK] * 3
          and shown["name"] == "r28" and shown["created_by"] == "h28-other"
          and names == ["r28 (revision 2)", "r28 (revision 3)", "r28 (revision 4)"])  # fmt: skip
    note = (
        f"revisions {names} inherit {inherited}; the other Ingestor's run: {shown['name']!r} by {shown['created_by']}"
    )
    return Outcome("28.7 revisions keep the exclusion", [verdict.status_code, *(r.status_code for r in replies),
                   theirs.status_code], "3 revisions excluded; a run of one's own", ok, True, note)  # fmt: skip


def case28_9_invisible_and_control_characters(site: LiveSite, data: dict) -> Outcome:
    tokens = data["site_tokens"]
    api, reviewer = _api(site, tokens["h28-names"]), _api(site, tokens["h28-reviewer"])
    before = row_counts()
    names = [
        api.post(site.url + "/api/v1/runs/import/", json=_run_body("n28", **{field: text}), timeout=60)
        for field, text in (("model", "GPT\u200d-4o"), ("setting", "\ufeffone-shot"), ("name", "r\U000e0041"))
    ]
    kernel = data["kernel"]
    notes = [reviewer.post(f"{site.url}/api/v1/kernels/{kernel}/reviews/", json={"verdict": "clean", "note": text},
                           timeout=30) for text in ("\x1b[2J", "\x07", "\x7f", "\x9b31m")]  # fmt: skip
    reasons = [
        reviewer.post(f"{site.url}/api/v1/kernels/{kernel}/reports/", json={"reason": "\x1b]0;x\x07"}, timeout=30)
    ]
    replies = names + notes + reasons
    ok = all(r.status_code == 400 for r in replies)
    ok = ok and all("invisible format character" in r.text for r in names)
    return Outcome("28.9 format and control characters", [r.status_code for r in replies],
                   "400 naming the character", ok, before == row_counts(), "",
                   [r.text[:200] for r in replies])  # fmt: skip


def case28_10_per_user_headers(site: LiveSite, data: dict) -> Outcome:
    api = _api(site, data["site_tokens"]["h28-numbers"])
    mine = api.get(f"{site.url}/api/v1/evaluations/{data['evaluation']}/", timeout=30)
    stale = requests.get(site.url + "/levels/all/", cookies={"sessionid": "stale" + "0" * 27}, timeout=30)
    vary = {v.strip().lower() for v in mine.headers.get("Vary", "").split(",")}
    private = "private" in mine.headers.get("Cache-Control", "") and {"authorization", "cookie"} <= vary
    public_with_cookie = "public" in stale.headers.get("Cache-Control", "") and "Set-Cookie" in stale.headers
    note = (
        f"per-user: Cache-Control {mine.headers.get('Cache-Control')!r}, Vary {mine.headers.get('Vary')!r}; "
        f"stale cookie: {stale.headers.get('Cache-Control')!r}, Set-Cookie {'yes' if 'Set-Cookie' in stale.headers else 'no'}"
    )
    return Outcome("28.10 per-user answers private", [mine.status_code, stale.status_code],
                   "private + Vary: Authorization, Cookie; no public Set-Cookie", private and not public_with_cookie
                   and mine.status_code == 200 and stale.status_code == 200, True, note)  # fmt: skip


SITE_CASES: list[Callable[[LiveSite, dict], Outcome]] = [
    case28_1_tiny_runtime,
    case28_5_counters_survive_eviction,
    case28_6_lockout_spares_the_owner,
    case28_7_revisions,
    case28_9_invisible_and_control_characters,
    case28_10_per_user_headers,
]


def replay_site(site: LiveSite, data: dict) -> list[Outcome]:
    """Every case above (`data` from seed_site); a case that breaks is reported, not fatal."""
    outcomes = []
    for case in SITE_CASES:
        try:
            outcomes.append(case(site, data))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            outcomes.append(Outcome(case.__name__, [], "", False, True, f"{type(exc).__name__}: {exc}"[:300]))
    return outcomes
