"""Who wrote what: one row per write a person (or an operator's command) caused, recorded by the
service that made it, in the write's own transaction."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import models

#: Who made a write: a signed-in user, or the name of the command an operator ran without one
#: ("manage.py import_run"). Never None: a write that cannot say who made it is refused.
Author = AbstractBaseUser | str


def author_name(by: Author) -> str:
    """How a record names who wrote: the username, or the command."""
    return by if isinstance(by, str) else by.get_username()


def acting_user(by: Author) -> AbstractBaseUser | None:
    """The user behind a write, or None for a command an operator ran without one (which the
    permission checks treat as the server itself, e.g. Run.writable_by)."""
    return None if isinstance(by, str) else by


class WriteRecordQuerySet(models.QuerySet):
    def of(self, target: models.Model) -> WriteRecordQuerySet:
        """The writes recorded on one object, newest first."""
        return self.filter(target_type=target._meta.label_lower, target_id=str(target.pk)).order_by("-created_at")


class WriteRecordManager(models.Manager.from_queryset(WriteRecordQuerySet)):  # type: ignore[misc]
    def note(
        self, by: Author, action: str, target: models.Model | type[models.Model] | None = None, summary: str = ""
    ) -> WriteRecord:
        """Record that `by` did `action` (the service's verb) to `target`, one object or, for a batch
        (rows of a table), its model; `summary` says how much ("3 created, 1 updated")."""
        if isinstance(by, str) and not by.strip():
            raise ValueError("A write made without a user names the command that made it.")
        if not isinstance(by, str) and not getattr(by, "is_authenticated", False):
            raise ValueError("A write is made by a signed-in user or a named command.")
        fields: dict[str, Any] = {
            "user": acting_user(by), "by_name": author_name(by)[:150], "action": action, "summary": summary[:300]
        }  # fmt: skip
        if isinstance(target, type):
            fields.update(target_type=target._meta.label_lower)
        elif target is not None:
            label = f"{target._meta.verbose_name} {target.pk}"  # not str(target): that may query its relations
            fields.update(target_type=target._meta.label_lower, target_id=str(target.pk), target_label=label[:200])
        return self.create(**fields)


class WriteRecord(models.Model):
    """One write and who made it: the user (kept as a name too, should the account go), or the
    command an operator ran without one; what was done and to what."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    by_name = models.CharField(max_length=150, help_text="The username, or the command run without one.")
    action = models.CharField(max_length=60, help_text="The service's verb, e.g. record_verdict.")
    target_type = models.CharField(max_length=100, blank=True, help_text="app_label.model of what was written.")
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    summary = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WriteRecordManager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            # The admin's list filtered by user or by action, newest first; an object's history.
            models.Index(fields=["user", "-created_at"], name="writerecord_user_recent"),
            models.Index(fields=["action", "-created_at"], name="writerecord_action_recent"),
            models.Index(fields=["target_type", "target_id"], name="writerecord_target"),
        ]

    def __str__(self) -> str:
        return f"{self.by_name}: {self.action} {self.target_label}".strip()
