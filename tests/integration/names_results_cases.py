"""The fourth probe's import and name findings (import_results taking what the API refuses; look-alike
and blank model names) against a live site, replayed by benchmarks/hardening_replay.py. Each case
returns an Outcome (live_site.py): whether it held, and whether the rows stayed as they must.

The import case runs the command in the replay's own process, on the site's database (a command
has no site); the names case goes through the site's API as a hostile Ingestor would."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

from tests.integration.live_site import KERNEL, LiveSite, Outcome, _api, row_counts

USER = "h39-names"
CYRILLIC_O = "\u043e"


def seed_names_results(data: dict) -> dict:
    """An Ingestor with a token for the names case; after live_site.seed."""
    from django.contrib.auth.models import Group, User
    from rest_framework.authtoken.models import Token

    user = User.objects.create_user(USER)
    user.groups.add(Group.objects.get(name="Ingestors"))
    return {**data, "names_token": Token.objects.create(user=user).key}


def _hostile_lines(record: dict) -> list[str]:
    """What the probe sent: a duplicate key, a speedup its own times deny, a year 9999, a denormal
    lower bound, a whole number of 10**30 (an OverflowError before)."""

    def changed(**figures) -> str:
        return json.dumps({**record, "evaluation": {**record["evaluation"], **figures}})

    duplicate = changed().replace('"speedup": 2.0', '"speedup": 2.0, "speedup": 9.5', 1)
    return [duplicate, changed(speedup=9.5), changed(finished_at="9999-12-31T00:00:00+00:00"),
            changed(speedup_low=4e-320), changed(trials_passed=10**30)]  # fmt: skip


def case39_6_import_results_refuses_by_line(site: LiveSite, data: dict) -> Outcome:
    from django.core.management import CommandError, call_command

    from leaderboard.ingest.results_exchange import exported
    from leaderboard.models import Evaluation

    folder = Path(tempfile.mkdtemp(prefix="kb-h39-"))
    header, record = list(exported(Evaluation.objects.filter(kernel_id=data["kernel"])))[:2]
    record["evaluation"].update(finished_at="2026-01-02T00:00:00+00:00", speedup_low=1.9, speedup_high=2.1)
    before, refusals = row_counts(), []
    for number, line in enumerate(_hostile_lines(record), start=1):
        path = folder / f"hostile-{number}.jsonl"
        path.write_text(json.dumps(header) + "\n" + line + "\n")
        try:
            call_command("import_results", str(path), stdout=io.StringIO())
            refusals.append("imported")
        except CommandError as exc:
            refusals.append(str(exc).split("nothing imported: ", 1)[-1])
        except Exception as exc:  # noqa: BLE001 - what the probe found: an uncaught error
            refusals.append(f"uncaught {type(exc).__name__}")
    ok = all(text.startswith("line 2: ") for text in refusals)
    return Outcome("39.6 import_results refuses by line", [], "5 named refusals", ok, before == row_counts(),
                   "; ".join(text[:60] for text in refusals), refusals)  # fmt: skip


def _import(api, site: LiveSite, model: str, name: str):
    body = {"model": model, "hardware": "cpu", "problem_set": "starter-v1", "name": name,
            "kernels": {"level_1_problem_1_sample_0_kernel.py": KERNEL}}  # fmt: skip
    return api.post(site.url + "/api/v1/runs/import/", json=body, timeout=60)


def case39_7_one_name_per_model(site: LiveSite, data: dict) -> Outcome:
    from leaderboard.models import LanguageModel, Run

    api = _api(site, data["names_token"])
    before = LanguageModel.objects.count()
    blank = [_import(api, site, text, "h39 blank") for text in ("\u3164", "GPT\u034f-4o", "\u00a0\u2003", "\u0301")]
    look_alike = _import(api, site, f"GPT-4{CYRILLIC_O}", "h39 look-alike")
    plain = _import(api, site, "gpt-4", "h39 plain")
    latin = _import(api, site, "ＧＰＴ-４o", "h39 full-width")
    replies = [*blank, look_alike, plain, latin]
    models = {name: Run.objects.filter(name=name).values_list("model__slug", flat=True).first()
              for name in ("h39 look-alike", "h39 plain", "h39 full-width")}  # fmt: skip
    ok = all(r.status_code == 400 for r in blank) and all(r.status_code in (200, 201) for r in replies[4:])
    ok = ok and models["h39 look-alike"] == models["h39 full-width"] == "gpt-4o" and models["h39 plain"] == "gpt-4"
    made = LanguageModel.objects.count() - before
    return Outcome("39.7 one name per model", [r.status_code for r in replies], "4x 400; look-alikes one model",
                   ok, made == 2, f"slugs by run: {models}; models made: {made}",
                   [r.text[:200] for r in replies])  # fmt: skip


NAMES_RESULTS_CASES = [case39_6_import_results_refuses_by_line, case39_7_one_name_per_model]


def replay_names_results(site: LiveSite, data: dict) -> list[Outcome]:
    """Both cases (`data` from seed_names_results); a case that breaks is reported, not fatal."""
    outcomes = []
    for case in NAMES_RESULTS_CASES:
        try:
            outcomes.append(case(site, data))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            outcomes.append(Outcome(case.__name__, [], "", False, True, f"{type(exc).__name__}: {exc}"[:300]))
    return outcomes
