"""Issue 28's site cases 5, 9 and 10 (case 1: tests/api/test_hardening_numbers.py; case 6 and the
lockout half of case 5: tests/django/test_sign_in_limit.py; case 7: tests/api/test_revisions.py;
live, all together: tests/integration/hardening_site_cases.py)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.cache import cache
from django.test import Client

from leaderboard.api.leaderboard import LeaderboardView
from leaderboard.reads.board import page as board_page
from leaderboard.reads.board import params as board_query
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)
from tests.rescoring import run_rescorer

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


def _builds(client, target, attribute: str, urls: list[str]) -> int:
    real = getattr(target, attribute)
    with mock.patch.object(target, attribute, autospec=True, side_effect=real) as build:
        for url in urls:
            assert client.get(url).status_code == 200, url
    return build.call_count


# ---------------------------------------------------------------------------------------------
# Case 5: the security counters apart from the cache; cache keys from anonymous p bounded


def test_new_p_values_make_a_bounded_number_of_board_entries(client, world):
    """Each new p stored another 137 KB board. p is rounded to two significant digits now: 300
    values between 1 and 1.3 are 4 boards (1 is the default; 1.1, 1.2, 1.3)."""
    world.kernel(world.problems[0], speedup=2.5)
    run_rescorer()  # a build is kept once scores exist
    urls = [f"/levels/1/?p={1 + i / 1000:.4f}" for i in range(300)]
    assert _builds(client, board_page, "_build", urls) <= 4
    api = [f"/api/v1/leaderboard/?level=1&p={1 + i / 1000:.4f}" for i in range(0, 300, 7)]
    assert _builds(client, LeaderboardView, "_page", api) <= 4


def test_the_rounded_p_is_the_p_shown(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    assert client.get("/api/v1/leaderboard/?level=1&p=2.4999").json()["p"] == 2.5
    assert board_query.rounded_p(0.004) == 0.0 and board_query.rounded_p(123.456) == 120.0


def test_the_write_limit_is_not_in_the_evictable_cache(settings, token_client, ingestor):
    """Emptying the cache (what allkeys-lru eviction does under anonymous traffic) does not reset
    the write limit: it counts in the counters store (leaderboard/ops/counters.py)."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "3/min"}}
    api = token_client(ingestor)
    codes = []
    for _ in range(5):
        codes.append(api.post("/api/v1/reported-scores/", [], format="json").status_code)
        cache.clear()
    assert codes[3:] == [429, 429], codes


# ---------------------------------------------------------------------------------------------
# Case 10: per-user answers are private; no Set-Cookie on a public answer


def test_a_per_user_api_answer_is_private_and_varies_on_authorization(token_client, ingestor, world):
    kernel = world.kernel(world.problems[0], speedup=2.5)
    for path in (f"/api/v1/evaluations/{kernel.latest_evaluation_id}/", "/api/v1/runs/", "/api/v1/leaderboard/"):
        reply = token_client(ingestor).get(path)
        assert reply.status_code == 200, path
        assert "private" in reply["Cache-Control"] and "public" not in reply["Cache-Control"], path
        vary = {v.strip().lower() for v in reply["Vary"].split(",")}
        assert {"authorization", "cookie"} <= vary, (path, reply["Vary"])


def test_a_signed_in_page_is_private_and_varies_on_cookie(client, ingestor, world):
    world.kernel(world.problems[0], speedup=2.5)
    client.force_login(ingestor)
    reply = client.get("/kernels/")
    if reply.status_code == 404:  # no kernel list page: the overview names the user too
        reply = client.get("/")
    assert "private" in reply.get("Cache-Control", ""), reply.get("Cache-Control")
    assert "cookie" in reply["Vary"].lower() and "authorization" in reply["Vary"].lower()


def test_a_stale_session_cookie_gets_no_public_answer_with_set_cookie(world):
    """An anonymous board answer to a request carrying a stale session cookie was public and
    carried the Set-Cookie that deletes it: a shared cache could hand that cookie to others."""
    world.kernel(world.problems[0], speedup=2.5)
    browser = Client()
    browser.cookies["sessionid"] = "stale0000000000000000000000000000"
    for path in ("/levels/all/", "/", "/api/v1/leaderboard/"):
        reply = browser.get(path)
        assert reply.status_code == 200
        public = "public" in reply.get("Cache-Control", "") or "s-maxage" in reply.get("Cache-Control", "")
        assert not (public and reply.cookies), (path, reply["Cache-Control"], list(reply.cookies))


def test_an_anonymous_board_stays_publicly_cacheable(client, world):
    world.kernel(world.problems[0], speedup=2.5)
    reply = client.get("/levels/all/")
    assert "public" in reply["Cache-Control"] and not reply.cookies


# ---------------------------------------------------------------------------------------------
# Case 9: invisible format characters in names; control characters in notes and reasons

INVISIBLE = ["GPT\u200d-4o", "\ufeffGPT-4o", "GPT-4o\U000e0041\U000e007f", "GPT\u00ad-4o", "GPT\u2060-4o"]
CONTROLS = ["look \x1b[2J here", "ring \x07", "del \x7f", "c1 \x85 \x9b31m"]


@pytest.mark.parametrize("field", ["model", "setting", "name"])
@pytest.mark.parametrize("text", INVISIBLE)
def test_a_name_with_an_invisible_format_character_is_refused(token_client, ingestor, world, field, text):
    body = {"model": "M", "hardware": world.hardware.slug, "problem_set": world.problem_set.slug,
            "kernels": {"level_1_problem_1_sample_0_kernel.py": "import torch\n"}, field: text}  # fmt: skip
    reply = token_client(ingestor).post("/api/v1/runs/import/", body, format="json")
    assert reply.status_code == 400, reply.content
    assert "invisible format character (U+" in reply.content.decode()


def test_names_in_other_scripts_and_notes_with_emoji_are_kept():
    from problems.text import control_character_problem

    assert control_character_problem("Qwen 2.5 — 数学 (ß, é)") is None
    assert control_character_problem("looks fine 👩\u200d💻\nsecond line\tand a tab", multiline=True) is None


@pytest.mark.parametrize("text", CONTROLS)
def test_a_review_note_or_report_reason_with_a_control_character_is_refused(token_client, reviewer, world, text):
    kernel = world.kernel(world.problems[0], speedup=2.5)
    api = token_client(reviewer)
    verdict = api.post(f"/api/v1/kernels/{kernel.pk}/reviews/", {"verdict": "clean", "note": text}, format="json")
    report = api.post(f"/api/v1/kernels/{kernel.pk}/reports/", {"reason": text}, format="json")
    for reply in (verdict, report):
        assert reply.status_code == 400, reply.content
        assert "control character (U+" in reply.content.decode()
    assert not kernel.reviews.exists() and not kernel.reports.exists()


@pytest.mark.parametrize("text", CONTROLS[:2])
def test_the_review_and_report_forms_refuse_control_characters(client, reviewer, world, text):
    kernel = world.kernel(world.problems[0], speedup=2.5)
    client.force_login(reviewer)
    client.post(f"/kernels/{kernel.pk}/review/", {"verdict": "clean", "note": text})
    client.post(f"/kernels/{kernel.pk}/report/", {"reason": text})
    assert not kernel.reviews.exists() and not kernel.reports.exists()
    client.post(f"/kernels/{kernel.pk}/review/", {"verdict": "clean", "note": "fine\nreally"})
    assert kernel.reviews.count() == 1
