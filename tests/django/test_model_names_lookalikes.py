"""One name per model: names that look alike (Cyrillic and Greek letters drawn like Latin ones,
full-width and mathematical letters, odd spaces, accents) name one model, and names that show
nothing (blank, invisible, filler or lone combining characters) are refused wherever models are
named: importers, the API, the admin and the database's own unique key."""

import pytest
from django.db import IntegrityError, transaction

from leaderboard.ingest.model_names import BadModelName, find_model, match_model
from leaderboard.ingest.reported_scores import read_csv
from leaderboard.ingest.uploads import RowErrors
from leaderboard.models import LanguageModel, ModelAlias, alias_key
from problems.text import name_problem, name_skeleton, normalise_name
from tests.django.reviews_factories import world_fixture  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db
CYRILLIC_O, GREEK_O = "\u043e", "\u03bf"
LOOK_ALIKES = [
    f"GPT-4{CYRILLIC_O}", f"Gpt-4{GREEK_O}", "\u0413PT-4o".replace("\u0413", "G"), "ＧＰＴ-４ｏ", "𝐆𝐏𝐓-4o", "𝙶𝙿𝚃-𝟺𝚘",
    "GPT-4\u00f3", "GPT-4o\u0301", "\u0421\u043b\u0430ude".replace("\u043b", "l"), "gpt\u00a0-4o".replace("\u00a0", ""),
]  # fmt: skip
NOT_NAMES = ["", "   ", "\u00a0\u2003", "\u3164", "\u115f", "\u1160", "\uffa0", "\u2800", "GPT\u034f-4o", "\u0301",
             "GPT-4o \u0301", "\u3164GPT-4o", "GPT-4o\ufe0f"]  # fmt: skip
SCORES = (
    "model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n"
    "{model},Lab,KernelBench L1,fast_1,10,%,one-shot,NVIDIA L40S,2025-02-14,https://example.com/paper\n"
)


@pytest.mark.parametrize("text", NOT_NAMES)
def test_a_name_that_shows_nothing_or_hides_a_character_is_refused(text):
    assert name_problem(text) is not None
    with pytest.raises(BadModelName):
        match_model(text, None)
    assert find_model(text) is None and not LanguageModel.objects.exists()


def test_names_in_other_scripts_with_accents_and_real_spaces_are_names():
    for text in ("Qwen 2.5 — 数学 (ß, é)", "e\u0301te", "DeepSeek-R1", "Λάμδα", "Модель 7B"):
        assert name_problem(text) is None, text


def test_odd_spaces_and_wide_letters_are_normalised_before_a_name_is_stored():
    assert normalise_name("Claude\u00a03.5\u2003Sonnet\u3000 ") == "Claude 3.5 Sonnet"
    assert normalise_name("ＧＰＴ-４ｏ") == "GPT-4o" and normalise_name("𝐆𝐏𝐓") == "GPT"
    model = match_model("Claude\u00a03.5\u202fSonnet", None)
    assert model.name == "Claude 3.5 Sonnet" and model.slug == "claude-35-sonnet"


def test_look_alikes_of_a_name_share_its_skeleton_and_ascii_stays_exact():
    assert {name_skeleton(text) for text in LOOK_ALIKES[:8]} == {"gpt-4o"}
    assert name_skeleton("gpt-o1") != name_skeleton("o1") and name_skeleton("gpt-4o") != name_skeleton("gpt-40")
    assert name_skeleton("Llama") != name_skeleton("LIama")  # ASCII is never folded: no guess


@pytest.mark.parametrize("look_alike", LOOK_ALIKES[:8])
def test_a_look_alike_finds_the_model_and_never_makes_a_second(look_alike):
    model = match_model("GPT-4o", None)
    assert find_model(look_alike) == model and match_model(look_alike, None) == model
    assert LanguageModel.objects.count() == 1


def test_a_cyrillic_look_alike_first_never_takes_another_names_slug():
    """The probe: `GPT-4о` (Cyrillic о) took the slug `gpt-4`, and a later `gpt-4` joined it."""
    look_alike = match_model(f"GPT-4{CYRILLIC_O}", None)
    assert look_alike.slug == "gpt-4o"
    assert find_model("gpt-4") is None
    gpt4 = match_model("gpt-4", None)
    assert gpt4 != look_alike and gpt4.slug == "gpt-4"
    assert match_model("GPT-4o", None) == look_alike  # the name it looks like is the same model


def test_a_name_with_letters_a_slug_cannot_hold_gets_a_slug_no_other_name_has():
    other = match_model("GPT-4\u65e5", None)
    assert other.slug.startswith("gpt-4-") and len(other.slug) == len("gpt-4-") + 6
    assert find_model("gpt-4") is None and match_model("gpt-4", None).slug == "gpt-4"


def test_the_database_refuses_a_second_model_that_looks_the_same():
    LanguageModel.objects.create(name="GPT-4o")
    with pytest.raises(IntegrityError), transaction.atomic():
        LanguageModel.objects.create(name=f"gpt-4{CYRILLIC_O}")


def test_the_admin_refuses_a_look_alike_or_a_blank_name():
    from django.core.exceptions import ValidationError

    first = LanguageModel.objects.create(name="GPT-4o")
    for text in (f"GPT-4{GREEK_O}", "\u3164", "GPT\u034f-4o"):
        with pytest.raises(ValidationError):
            LanguageModel(name=text).clean()
    first.clean()  # its own name is no conflict


def test_an_alias_that_looks_like_another_models_name_or_alias_is_refused():
    a, b = LanguageModel.objects.create(name="A"), LanguageModel.objects.create(name="Kevin-32B")
    ModelAlias.objects.create(alias="cognition/kevin", model=b)
    assert alias_key(f"c{CYRILLIC_O}gniti{CYRILLIC_O}n/kevin") == "cognition/kevin"
    with pytest.raises(ValueError, match="already names model"):
        match_model("A", None, aliases=(f"c{CYRILLIC_O}gnition/kevin",))
    with pytest.raises(ValueError, match="is the name of model"):
        match_model("A", None, aliases=("Kevin-32\u0412",))
    assert a.aliases.count() == 0


@pytest.mark.parametrize("text", ["\u3164", "GPT\u034f-4o", "\u0301GPT"])
def test_a_scores_table_names_the_row_of_a_model_that_is_not_a_name(text):
    with pytest.raises(RowErrors, match="line 2: model .*(invisible|combining)"):
        read_csv(SCORES.format(model=text), "scores.csv")


@pytest.mark.parametrize("text", ["\u3164", "\u00a0", "GPT\u034f-4o", "\u1160\u1160", "\u0301"])
def test_the_api_refuses_a_run_of_a_model_named_by_nothing(token_client, ingestor, world, text):
    body = {"model": text, "hardware": world.hardware.slug, "problem_set": world.problem_set.slug,
            "kernels": {"level_1_problem_1_sample_0_kernel.py": "import torch\n"}}  # fmt: skip
    before = LanguageModel.objects.count()
    reply = token_client(ingestor).post("/api/v1/runs/import/", body, format="json")
    assert reply.status_code == 400, reply.content
    assert LanguageModel.objects.count() == before
