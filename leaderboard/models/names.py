"""Labs, language models, the aliases their names are known by, and merges of one model into another."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django.utils.text import slugify

from problems.text import name_problem, name_skeleton, normalise_name


def unique_slug(model: type[models.Model], text: str, max_length: int = 80) -> str:
    """A slug for `text` that no row of `model` has yet (suffixes -2, -3, ... on collision)."""
    base = slugify(text)[:max_length] or "item"
    slug, n = base, 2
    while model.objects.filter(slug=slug).exists():
        slug = f"{base[: max_length - 6]}-{n}"
        n += 1
    return slug


class Lab(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=80, unique=True)
    website = models.URLField(blank=True)
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if not self.slug:
            self.slug = unique_slug(Lab, self.name)
        super().save(*args, **kwargs)


class LanguageModel(models.Model):
    """A language model that writes kernels (not Django's Model, nor KernelBench's `class Model`)."""

    name = models.CharField(max_length=120, unique=True)
    # One name, one record: two names whose skeletons agree look alike (`GPT-4о` with a Cyrillic о
    # is `GPT-4o`), so the second is found as the first, never made beside it.
    name_key = models.CharField(max_length=400, unique=True, editable=False, help_text="alias_key(name).")
    slug = models.SlugField(max_length=80, unique=True)
    lab = models.ForeignKey(Lab, on_delete=models.PROTECT, related_name="models", null=True, blank=True)
    release_date = models.DateField(null=True, blank=True)
    open_weights = models.BooleanField(null=True, blank=True, help_text="Empty when unknown.")
    url = models.URLField(blank=True)
    is_demo = models.BooleanField(default=False, help_text="Synthetic row made by seed_demo.")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["-added_at"], name="model_added_idx")]  # overview: last model added

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.name = normalise_name(self.name)
        self.name_key = alias_key(self.name)
        if not self.slug:
            self.slug = unique_slug(LanguageModel, model_slug_text(self.name))
        if kwargs.get("update_fields") is not None and "name" in kwargs["update_fields"]:
            kwargs["update_fields"] = {*kwargs["update_fields"], "name_key"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """The admin's check: a name that is a name (problems.text.name_problem), and no other model
        whose name looks the same."""
        super().clean()
        if problem := name_problem(self.name or ""):
            raise ValidationError({"name": f"The name {problem}."})
        same = LanguageModel.objects.filter(name_key=alias_key(self.name)).exclude(pk=self.pk).first()
        if same is not None:
            raise ValidationError({"name": f"The name looks like model {same.pk}'s ({same.name!r}): merge instead."})

    def lock(self) -> None:
        """Lock this model's row until the transaction ends: concurrent requests that find or make a
        run of this model (imports, submissions) take turns, so they agree on one run."""
        list(LanguageModel.objects.select_for_update().filter(pk=self.pk).values_list("pk"))

    def get_absolute_url(self) -> str:
        return reverse("model-detail", args=[self.slug])


def model_slug_text(name: str) -> str:
    """What a new model's slug is made from: its skeleton, so a look-alike name gets the slug of the
    name it looks like (and so finds that model first); when the skeleton holds letters a slug
    cannot (`GPT-4日`), a short hash of it is added, so the slug never is another name's (`gpt-4`)."""
    skeleton = name_skeleton(name)
    if any(char.isalnum() and not char.isascii() for char in skeleton):
        return f"{skeleton} {hashlib.sha256(skeleton.encode()).hexdigest()[:6]}"
    return skeleton


def alias_key(text: str) -> str:
    """How names and aliases are compared: their skeleton (problems.text.name_skeleton): case,
    runs of white space, accents, invisible characters and look-alike letters of other scripts
    (Cyrillic, Greek; full-width and mathematical letters) set aside. Nothing else is normalised:
    `gpt-o1` and `o1` are different names (never a guess)."""
    return name_skeleton(text)


class ModelAlias(models.Model):
    """A name another source uses for a model (`claude-3-5-sonnet-20241022`, `gpt-o1`): one model,
    one record, whoever names it. Matched exactly (alias_key), never by similarity."""

    alias = models.CharField(max_length=200, help_text="As the source writes it.")
    key = models.CharField(max_length=200, unique=True, editable=False, help_text="alias_key(alias): what is matched.")
    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="aliases")
    source = models.CharField(max_length=200, blank=True, help_text="Who uses this name (a file, a leaderboard).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "model aliases"

    def __str__(self) -> str:
        return f"{self.alias} -> {self.model_id}"

    def save(self, *args, **kwargs) -> None:
        self.key = alias_key(self.alias)
        super().save(*args, **kwargs)

    def conflict(self) -> AliasConflict | None:
        """Why this alias may not be stored for its model; None when it may. The one rule for every
        way an alias is added (model_names.add_alias for importers, clean() for the admin)."""
        key, model = alias_key(self.alias), self.model
        if not key:
            return AliasConflict("an alias needs a name", nothing_to_store=True)
        if key == alias_key(model.name):
            return AliasConflict(f"{self.alias!r} is the model's own name", nothing_to_store=True)
        # find_model looks at aliases before names: this alias would take the other model's name over.
        named = LanguageModel.objects.filter(name_key=key)
        named = named.exclude(pk=model.pk).first() if model.pk else named.first()
        if named is not None:
            return AliasConflict(f"{self.alias!r} is the name of model {named.pk}; merge the two models instead")
        stored = ModelAlias.objects.filter(key=key).exclude(pk=self.pk).first()
        if stored is None:
            return None
        if model.pk and stored.model_id == model.pk:
            return AliasConflict(f"the alias {self.alias!r} is stored for this model already", nothing_to_store=True)
        taken = f"the alias {self.alias!r} already names model {stored.model_id}; merge the two models instead"
        return AliasConflict(taken)

    def clean(self) -> None:
        super().clean()
        conflict = self.conflict() if self._model_known() else None
        if conflict is not None:
            raise ValidationError({"alias": conflict.reason})

    def _model_known(self) -> bool:
        try:
            return self.model is not None
        except LanguageModel.DoesNotExist:  # no model chosen: the form says so
            return False


@dataclass(frozen=True)
class AliasConflict:
    reason: str
    nothing_to_store: bool = False  # no name, or one that already names this model: not an error for importers


class ModelMerge(models.Model):
    """The audit row of one merge of a model into another (leaderboard/ingest/model_names.merge_models):
    the merged model is gone, so its name, slug and what moved are kept here."""

    merged_name = models.CharField(max_length=120)
    merged_slug = models.CharField(max_length=80)
    into = models.ForeignKey(LanguageModel, on_delete=models.PROTECT, related_name="merges")
    moved = models.JSONField(default=dict, help_text="How many runs, reported scores, launch posts and aliases moved.")
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    merged_by_name = models.CharField(max_length=150, blank=True, help_text="Who, as text (kept if the user goes).")
    merged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-merged_at"]

    def __str__(self) -> str:
        return f"{self.merged_name} merged into {self.into_id} at {self.merged_at:%Y-%m-%d %H:%M}"
