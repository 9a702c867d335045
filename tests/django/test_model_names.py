"""One model, one record (issue 26.2): exact aliases, never a guess; merging two records."""

import io

import pytest
from django.contrib import admin as django_admin
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from leaderboard.admin import ModelAliasInline
from leaderboard.ingest.admin_actions import MERGE_PERMISSIONS
from leaderboard.ingest.launch_posts import read_csv as read_posts
from leaderboard.ingest.launch_posts import store_rows as store_posts
from leaderboard.ingest.model_names import MergeConflict, find_model, match_model, merge_models
from leaderboard.ingest.reported_scores import read_csv, store_rows
from leaderboard.models import Lab, LanguageModel, LaunchPost, ModelAlias, ModelMerge, ReportedScore, Run, alias_key
from problems.models import Hardware, ProblemSet

pytestmark = pytest.mark.django_db
SCORES = (
    "model,organization,variant,metric,value,unit,setting,hardware,date,source_url\n"
    "{model},Anthropic,KernelBench v0 L1 fast_1 vs PyTorch Eager,fast_1,{value},%,one-shot,NVIDIA L40S,2025-02-14,"
    "https://arxiv.org/html/2502.10517v1\n"
)


def scores(model: str, value: int = 10) -> None:
    store_rows(read_csv(SCORES.format(model=model, value=value), "scores.csv"), by="manage.py test")


def test_alias_keys_set_aside_case_spaces_and_look_alikes_only():
    assert alias_key("  Claude  3.5\tSonnet ") == "claude 3.5 sonnet"
    assert alias_key("gpt-o1") != alias_key("o1") and alias_key("gpt-o1") != alias_key("gpt o1")


def test_a_known_alias_finds_the_existing_record_and_a_near_name_finds_nothing():
    scores("Claude 3.5 Sonnet")
    sonnet = LanguageModel.objects.get(name="Claude 3.5 Sonnet")
    assert find_model("claude-3-5-sonnet-20241022") == sonnet and find_model("CLAUDE-3.5-SONNET") == sonnet
    assert find_model("claude-3-5-sonnet") is None and find_model("Claude 3.5") is None  # never a guess
    scores("claude-3-5-sonnet-20241022", 10)  # a source naming it by its API identifier: the same record
    assert LanguageModel.objects.filter(name__icontains="sonnet").count() == 1 and sonnet.reported_scores.count() == 1


def test_o1_preview_is_not_openai_o1():
    o1 = LanguageModel.objects.create(name="OpenAI o1")
    preview = match_model("o1-preview-2024-09-12", None, aliases=("gpt-o1",))
    assert preview != o1 and preview.name == "o1-preview" and preview.lab.name == "OpenAI"
    assert find_model("gpt-o1") == preview and find_model("o1") is None
    assert set(preview.aliases.values_list("alias", flat=True)) == {"o1-preview-2024-09-12", "gpt-o1"}


def test_an_alias_stored_in_the_admin_is_used_by_every_importer():
    model = LanguageModel.objects.create(name="Kevin-32B")
    ModelAlias.objects.create(alias="cognition/kevin-32b", model=model)
    scores("Cognition/Kevin-32B")
    posts = "date,lab,model,title,url,lists_kernelbench,kernelbench_score\n2025-05-01,Cognition,cognition/kevin-32b,Kevin,https://example.com/kevin,true,\n"
    store_posts(read_posts(posts, "posts.csv"), by="manage.py test")
    assert model.reported_scores.count() == 1 and LaunchPost.objects.get().model == model
    assert LanguageModel.objects.count() == 1


def test_an_alias_never_moves_to_another_model_silently():
    a, b = LanguageModel.objects.create(name="A"), LanguageModel.objects.create(name="B")
    ModelAlias.objects.create(alias="shared", model=a)
    with pytest.raises(ValueError, match="already names model"):
        match_model("B", None, aliases=("shared",))
    assert find_model("shared") == a and b.aliases.count() == 0


@pytest.fixture
def split():
    """The same model twice: the paper's record and one an import made, each with its own data."""
    kept = LanguageModel.objects.create(name="Claude 3.5 Sonnet")
    scores("Claude 3.5 Sonnet")
    other = LanguageModel.objects.create(name="claude-3.5-sonnet")
    ModelAlias.objects.create(alias="claude-3-5-sonnet-20241022", model=other)
    problem_set = ProblemSet.objects.create(slug="s", name="S")
    hardware = Hardware.objects.create(slug="h200", name="NVIDIA H200")
    run = Run.objects.create(model=other, problem_set=problem_set, hardware=hardware)
    store_rows(
        read_csv(SCORES.format(model="claude-3.5-sonnet", value=10).replace("L1", "L2"), "x.csv"), by="manage.py test"
    )
    anthropic = Lab.objects.get(name="Anthropic")  # made by the scores' import
    LaunchPost.objects.create(
        lab=anthropic, model=other, title="t", url="https://example.com/p", published_on="2024-10-22"
    )
    return kept, other, run


def test_merging_moves_everything_keeps_the_names_and_records_who(client, split):
    kept, other, run = split
    admin = User.objects.create_superuser("boss", "b@example.com", "pw")
    out = io.StringIO()
    call_command("merge_models", "claude-3.5-sonnet", "Claude 3.5 Sonnet", "--user", "boss", stdout=out)
    assert "merged claude-3.5-sonnet into Claude 3.5 Sonnet (runs: 1, reported scores: 1" in out.getvalue()
    assert not LanguageModel.objects.filter(pk=other.pk).exists()
    run.refresh_from_db()
    assert run.model == kept and kept.reported_scores.count() == 2 and LaunchPost.objects.get().model == kept
    assert find_model("claude-3-5-sonnet-20241022") == kept and find_model(other.slug) == kept
    merge = ModelMerge.objects.get()
    assert (merge.merged_name, merge.into, merge.merged_by, merge.merged_by_name) == (other.name, kept, admin, "boss")
    assert merge.moved["runs"] == 1 and merge.merged_at is not None
    moved = client.get(f"/models/{other.slug}/")  # old links still lead somewhere
    assert moved.status_code == 301 and moved["Location"] == kept.get_absolute_url()


def test_a_merge_that_would_lose_a_score_changes_nothing(split):
    kept, other, _ = split
    scores("claude-3.5-sonnet", 12)  # the same score as the kept model's, with another value
    with pytest.raises(MergeConflict, match="report different values"):
        merge_models(other, kept, by="manage.py test")
    assert LanguageModel.objects.filter(pk=other.pk).exists() and ReportedScore.objects.count() == 3
    with pytest.raises(CommandError, match="nothing merged"):
        call_command("merge_models", other.slug, kept.slug, stdout=io.StringIO())


def test_the_admin_action_merges_into_the_model_chosen(client, split):
    kept, other, run = split
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw"))
    url = "/admin/leaderboard/languagemodel/"
    page = client.post(url, {"action": "merge_selected_models", "_selected_action": [kept.pk, other.pk]})
    assert page.status_code == 200 and b"Merge models" in page.content
    client.post(url, {"action": "merge_selected_models", "_selected_action": [kept.pk, other.pk], "keep": kept.pk})
    run.refresh_from_db()
    assert run.model == kept and ModelMerge.objects.get().merged_by.username == "boss"
    assert client.get(f"/admin/leaderboard/languagemodel/{kept.pk}/change/").status_code == 200  # the alias inline


def _staff_with(*codenames: str) -> User:
    user = User.objects.create_user("clerk", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="leaderboard", codename__in=codenames))
    return user


def test_merging_needs_every_permission_the_merge_uses(client, split):
    """A merge deletes a model and scores and moves runs, posts and aliases: `change` on models
    alone neither offers the action nor runs it when posted."""
    kept, other, run = split
    client.force_login(_staff_with("view_languagemodel", "change_languagemodel"))
    url = "/admin/leaderboard/languagemodel/"
    assert b"merge_selected_models" not in client.get(url).content
    client.post(url, {"action": "merge_selected_models", "_selected_action": [kept.pk, other.pk], "keep": kept.pk})
    run.refresh_from_db()
    assert run.model == other and LanguageModel.objects.filter(pk=other.pk).exists() and not ModelMerge.objects.exists()


def test_staff_with_every_merge_permission_may_merge(client, split):
    kept, other, run = split
    codenames = [name.split(".")[1] for name in MERGE_PERMISSIONS]
    client.force_login(_staff_with("view_languagemodel", *codenames))
    url = "/admin/leaderboard/languagemodel/"
    client.post(url, {"action": "merge_selected_models", "_selected_action": [kept.pk, other.pk], "keep": kept.pk})
    run.refresh_from_db()
    assert run.model == kept and ModelMerge.objects.get().merged_by.username == "clerk"


# Aliases added in the admin follow the rule importers follow (ModelAlias.conflict): find_model
# looks at aliases before names, so an alias equal to another model's name would take it over; and
# an alias stored already is a form error, not a 500 from the unique key.


@pytest.fixture
def boss_client(client):
    client.force_login(User.objects.create_superuser("boss", "b@example.com", "pw"))
    return client


def test_the_alias_admin_refuses_another_models_name_and_a_stored_alias(boss_client):
    a, b = LanguageModel.objects.create(name="GPT-4o"), LanguageModel.objects.create(name="Other")
    ModelAlias.objects.create(alias="gpt4o-2024", model=a)
    url = "/admin/leaderboard/modelalias/add/"
    for alias in ("gpt-4O", "GPT4O-2024 ", "Other"):
        response = boss_client.post(url, {"alias": alias, "model": b.pk, "source": ""})
        assert response.status_code == 200 and response.context["adminform"].form.errors, alias
    assert find_model("gpt-4o") == a and ModelAlias.objects.count() == 1
    assert boss_client.post(url, {"alias": "fine-name", "model": b.pk, "source": ""}).status_code == 302
    assert find_model("fine-name") == b


def _inline_formset(model: LanguageModel, rows: list[str]):
    request = RequestFactory().post("/")
    request.user = User.objects.get(username="boss")
    formset_class = ModelAliasInline(LanguageModel, django_admin.site).get_formset(request, model)
    data = {"aliases-TOTAL_FORMS": len(rows), "aliases-INITIAL_FORMS": 0}
    data |= {f"aliases-{i}-alias": alias for i, alias in enumerate(rows)}
    return formset_class(data, instance=model, prefix="aliases")


def test_the_alias_inline_refuses_another_models_name_and_the_same_alias_twice(boss_client):
    a, b = LanguageModel.objects.create(name="GPT-4o"), LanguageModel.objects.create(name="Other")
    assert not _inline_formset(b, ["gpt-4o"]).is_valid()
    assert not _inline_formset(b, ["twin", "TWIN"]).is_valid()
    formset = _inline_formset(b, ["new-name"])
    assert formset.is_valid()
    formset.save()
    assert find_model("new-name") == b and find_model("gpt-4o") == a
