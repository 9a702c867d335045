from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from leaderboard.ingest.model_names import MergeConflict, find_model, merge_models
from leaderboard.management.authors import command_author


class Command(BaseCommand):
    help = (
        "Merge one model record into another: its runs, reported scores, launch posts and aliases move, its name "
        "and slug become aliases of the kept model, and the merge is recorded (ModelMerge: who and when)."
    )

    def add_arguments(self, parser):
        parser.add_argument("merged", help="The model to merge away (slug, name or alias).")
        parser.add_argument("into", help="The model that stays (slug, name or alias).")
        parser.add_argument(
            "--user", default="", help="Who merges (a username; recorded). Default: this command, by name."
        )

    def handle(self, merged: str, into: str, user: str, **options):
        found = {text: find_model(text) for text in (merged, into)}
        missing = [text for text, model in found.items() if model is None]
        if missing:
            raise CommandError(f"no model {', '.join(map(repr, missing))} (by slug, name or alias)")
        who = command_author(self)
        if user:
            who = get_user_model().objects.filter(username=user).first()
            if who is None:
                raise CommandError(f"no user {user!r}")
        try:
            record = merge_models(found[merged], found[into], by=who)
        except MergeConflict as exc:
            raise CommandError(f"nothing merged: {exc}") from None
        moved = ", ".join(f"{name.replace('_', ' ')}: {count}" for name, count in record.moved.items())
        self.stdout.write(self.style.SUCCESS(f"merged {record.merged_name} into {record.into.name} ({moved})"))
