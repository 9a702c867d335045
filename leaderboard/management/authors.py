"""Who a management command's writes are recorded as."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from leaderboard.models import Author


def command_author(command: BaseCommand) -> Author:
    """The command itself, by name ("manage.py import_run"): an operator's command run with no user
    says so in the record of each write, rather than leaving its author blank."""
    return f"manage.py {type(command).__module__.rsplit('.', 1)[-1]}"
