"""One model, one record, whoever names it: finding a model by the names other sources use, and
merging two records of one model.

Every importer (reported scores, run import, launch posts, the original leaderboard), the API and
`kbl` (through the API) find models here, in this order, and never by a guess:

1. a ModelAlias whose key is the name's alias_key (its skeleton: case, white space, accents,
   invisible characters and look-alike letters of other scripts aside; otherwise exact);
2. a LanguageModel whose name has that skeleton (`GPT-4о` with a Cyrillic о finds `GPT-4o`);
3. a known alias (data/model_aliases.csv: `claude-3-5-sonnet-20241022` is Claude 3.5 Sonnet,
   `gpt-o1` is o1-preview and not "OpenAI o1"): the named model, made on first use, and the alias
   stored so that the next lookup is step 1;
4. otherwise (match_model only) a new model of that name, normalised (problems.text.normalise_name).

A name that is not one (blank, invisible or filler characters, a lone combining character:
problems.text.name_problem) finds nothing and is refused (BadModelName) before anything is made.

merge_models moves everything of one model (runs, reported scores, launch posts, aliases) onto
another, keeps the merged model's name and slug as aliases, records who merged and when
(ModelMerge), and deletes the emptied record. Nothing is lost: a reported score that would
collide with one of the target's is dropped only when it says the same thing, else the merge is
refused (MergeConflict) and nothing changes.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from leaderboard.boards import marks as board_marks
from leaderboard.models import (
    Author,
    Lab,
    LanguageModel,
    LaunchPost,
    ModelAlias,
    ModelMerge,
    ReportedScore,
    Run,
    WriteRecord,
    acting_user,
    alias_key,
    author_name,
)
from problems.importing import find_or_create
from problems.text import name_problem, normalise_name

KNOWN_ALIASES_CSV = settings.BASE_DIR / "data" / "model_aliases.csv"


class BadModelName(ValueError):
    """A text that cannot name a model; the message says which text and why."""


def model_name_problem(text: str, what: str = "model") -> str | None:
    """Why `text` cannot name a model, as a refusal says it (`model 'x' contains an invisible
    character (U+1160)`), or None when it can (and fits LanguageModel.name once normalised)."""
    problem = name_problem(text)
    if problem is None and len(normalise_name(text)) > LanguageModel._meta.get_field("name").max_length:
        problem = "is too long"
    return f"{what} {text[:60]!r} {problem}" if problem else None


@dataclass(frozen=True)
class KnownAlias:
    alias: str
    model: str
    organization: str
    source: str


@functools.cache
def known_aliases() -> dict[str, KnownAlias]:
    """data/model_aliases.csv by alias_key: names other sources use, and the model each one means."""
    with open(KNOWN_ALIASES_CSV, encoding="utf-8", newline="") as handle:
        rows = [KnownAlias(r["alias"], r["model"], r["organization"], r["source"]) for r in csv.DictReader(handle)]
    return {alias_key(row.alias): row for row in rows}


def match_lab(name: str) -> Lab | None:
    """The lab of this name (case-insensitive), made on first use; concurrent first uses agree."""
    if not name:
        return None
    lab, _ = find_or_create(
        lambda: Lab.objects.filter(name__iexact=name).first(), lambda: Lab.objects.create(name=name)
    )
    return lab


def _by_name(name: str) -> LanguageModel | None:
    key = alias_key(name)
    alias = ModelAlias.objects.select_related("model").filter(key=key).first()
    if alias is not None:
        return alias.model
    return LanguageModel.objects.filter(name_key=key).first()


def find_model(text: str) -> LanguageModel | None:
    """The model `text` names (its slug, an alias, its name, a known alias), or None; makes the
    model a known alias names on first use (steps 1-3 of the module's order)."""
    text = (text or "").strip()
    if not text or name_problem(text):
        return None
    found = LanguageModel.objects.filter(slug=text).first() or _by_name(text)
    if found is not None:
        return found
    known = known_aliases().get(alias_key(text))
    return _attach_known(known) if known is not None else None


def _attach_known(known: KnownAlias) -> LanguageModel:
    """The model a known alias names (made on first use), with the alias stored."""
    model = _by_name(known.model)
    if model is None:
        model, _ = find_or_create(
            lambda: _by_name(known.model),
            lambda: LanguageModel.objects.create(name=known.model, lab=match_lab(known.organization)),
        )
    add_alias(model, known.alias, known.source)
    return model


def add_alias(model: LanguageModel, alias: str, source: str = "") -> ModelAlias | None:
    """Store `alias` for `model` (None when it is the model's own name or already stored for it);
    ValueError when the alias names another model (never moved silently: merge them). The rule is
    ModelAlias.conflict, which the admin's forms apply too."""
    conflict = ModelAlias(alias=alias, model=model).conflict()
    if conflict is not None:
        if conflict.nothing_to_store:
            return None
        raise ValueError(conflict.reason)
    key = alias_key(alias)
    row, _ = find_or_create(
        lambda: ModelAlias.objects.filter(key=key, model=model).first(),
        lambda: ModelAlias.objects.create(alias=normalise_name(alias), model=model, source=source),
    )
    return row


def match_model(name: str, lab: Lab | None, *, aliases: tuple[str, ...] = (), source: str = "") -> LanguageModel:
    """The model `name` (or, failing it, one of `aliases`) names, else a new model called `name`;
    the other names are stored as its aliases. Concurrent imports naming a new model all get the
    one row (find_or_create). A model without a lab gets `lab`. BadModelName when a name is not one."""
    for text in (name, *aliases):
        if problem := model_name_problem(text):
            raise BadModelName(problem)
    name = normalise_name(name)
    model = next((found for found in map(find_model, (name, *aliases)) if found is not None), None)
    if model is None:
        model, _ = find_or_create(lambda: _by_name(name), lambda: LanguageModel.objects.create(name=name, lab=lab))
    for other in (name, *aliases):
        add_alias(model, other, source)
    if model.lab is None and lab is not None:
        model.lab = lab
        model.save(update_fields=["lab"])
    return model


# ---------------------------------------------------------------------------------------------
# merging


class MergeConflict(ValueError):
    """The merge would lose something (e.g. two different values of one reported score)."""


@transaction.atomic
def merge_models(merged: LanguageModel, into: LanguageModel, *, by: Author) -> ModelMerge:
    """`by` merges two models: move every run, reported score, launch post and alias of `merged` onto `into`, keep
    `merged`'s name and slug as aliases of `into`, record the merge, delete `merged`."""
    if merged.pk == into.pk:
        raise MergeConflict("a model cannot be merged into itself")
    dropped = _drop_duplicate_scores(merged, into)
    run_ids = list(Run.objects.filter(model=merged).values_list("pk", flat=True))
    moved = {
        "runs": Run.objects.filter(model=merged).update(model=into),
        "reported_scores": ReportedScore.objects.filter(model=merged).update(model=into),
        "duplicate_reported_scores_dropped": dropped,
        "launch_posts": LaunchPost.objects.filter(model=merged).update(model=into),
        "aliases": ModelAlias.objects.filter(model=merged).update(model=into),
    }
    _keep_details(merged, into)
    name, slug = merged.name, merged.slug
    record = ModelMerge.objects.create(
        merged_name=name, merged_slug=slug, into=into, moved=moved, merged_by=acting_user(by),
        merged_by_name=author_name(by),
    )  # fmt: skip
    WriteRecord.objects.note(by, "merge_models", into, summary=f"{name} merged into {into.name}")
    merged.delete()
    for alias in (name, slug):
        if ModelAlias.objects.filter(key=alias_key(alias)).exists() is False:
            add_alias(into, alias, f"merged into {into.name} (merge {record.pk})")
    if run_ids:  # QuerySet.update sends no signal: the boards re-score these runs
        board_marks.mark_runs(run_ids)
    return record


def _drop_duplicate_scores(merged: LanguageModel, into: LanguageModel) -> int:
    """Delete `merged`'s reported scores that `into` already holds with the same value; MergeConflict
    naming those whose value differs (the unique key: variant, metric, setting, source)."""
    theirs = {(s.variant, s.metric, s.setting, s.source_url): s for s in ReportedScore.objects.filter(model=into)}
    duplicates, conflicts = [], []
    for score in ReportedScore.objects.filter(model=merged):
        other = theirs.get((score.variant, score.metric, score.setting, score.source_url))
        if other is None:
            continue
        if (other.value, other.unit) == (score.value, score.unit):
            duplicates.append(score.pk)
        else:
            conflicts.append(f"{score.variant} {score.metric}: {score.display_value} vs {other.display_value}")
    if conflicts:
        raise MergeConflict(
            f"{merged.name} and {into.name} report different values for the same score: " + "; ".join(conflicts[:5])
        )
    ReportedScore.objects.filter(pk__in=duplicates).delete()
    return len(duplicates)


def _keep_details(merged: LanguageModel, into: LanguageModel) -> None:
    """Details `into` lacks (lab, release date, URL, open weights) come from `merged`."""
    changed = [
        name
        for name in ("lab", "release_date", "url", "open_weights")
        if getattr(into, name) in (None, "") and getattr(merged, name) not in (None, "")
    ]
    for name in changed:
        setattr(into, name, getattr(merged, name))
    if changed:
        into.save(update_fields=changed)
