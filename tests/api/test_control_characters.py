"""Names and settings with terminal control characters are refused where they come in, with a 400
naming the field and the character (problems/text.py). Issue 19 case 13: a model named
"M\\x1b]0;pwned\\x07\\x1b[2J" was accepted, and `kbl` printed it raw."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard.models import LanguageModel, ReportedScore, Run
from problems.text import control_character
from tests.api.test_run_import import run_zip, upload

HOSTILE = ["M\x1b]0;pwned\x07", "M\x1b[2J", "M\u202eevil", "M\x9b2J", "M\x00", "M\rfake", "M\u2028x", "M\x7f"]
FORBIDDEN = st.sampled_from(["\x00", "\x07", "\x1b", "\r", "\n", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u2028"])


@pytest.mark.parametrize("field", ["model", "setting", "name", "organization"])
@pytest.mark.parametrize("value", HOSTILE[:4])
def test_a_run_import_refuses_control_characters_naming_the_field(token_client, ingestor, baseline, field, value):
    before = (Run.objects.count(), LanguageModel.objects.count())
    response = upload(token_client(ingestor), run_zip(), **{field: value})
    assert response.status_code == 400, response.content
    assert field in response.json() and "control character (U+" in str(response.json()[field])
    assert (Run.objects.count(), LanguageModel.objects.count()) == before


def test_run_notes_may_have_lines_but_no_escapes(token_client, ingestor, baseline):
    assert upload(token_client(ingestor), run_zip(), notes="line one\nline two\tok").status_code == 201
    response = upload(token_client(ingestor), run_zip(), name="run-2", notes="x\x1b[2J")
    assert response.status_code == 400 and "notes" in response.json()


@pytest.mark.parametrize("value", HOSTILE)
def test_a_reported_score_refuses_them_in_any_cell(token_client, ingestor, value):
    row = {"model": value, "variant": "v", "metric": "fast_1", "value": 4, "unit": "%", "date": "2025-02-14",
           "source_url": "https://example.org/a"}  # fmt: skip
    response = token_client(ingestor).post("/api/v1/reported-scores/", row, format="json")
    text = response.content.decode()
    assert response.status_code == 400 and (
        "model contains a control character" in text or "model contains a NUL" in text
    )
    assert not ReportedScore.objects.exists()


@hsettings(max_examples=200, deadline=None)
@given(before=st.text(max_size=20), bad=FORBIDDEN, after=st.text(max_size=20))
def test_any_forbidden_character_anywhere_is_found(before, bad, after):
    assert control_character(before + bad + after) is not None


@hsettings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cc", "Cf", "Zl", "Zp", "Cs"]), max_size=40))
def test_printable_names_pass(text):
    assert control_character(text) is None


@pytest.mark.parametrize(
    ("url", "form"),
    [("/admin/leaderboard/lab/add/", {"name": "Lab\x1b[2J", "slug": "lab"}),
     ("/admin/problems/hardware/add/", {"slug": "h1", "name": "H\u202e1", "kind": "gpu"})],
)  # fmt: skip
def test_the_admin_refuses_them_too(admin_client, url, form, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    response = admin_client.post(url, form)
    errors = response.context["adminform"].form.errors
    assert response.status_code == 200 and "Contains a control character (U+" in str(errors.get("name")), errors
