"""The web benchmark's entry point: `python -m benchmarks.web.bench ACTION [options]` from the
repository root (actions in benchmarks/web/actions.py). It sets Django up itself, with the settings
of the environment (DJANGO_SETTINGS_MODULE, DATABASE_URL), so the benchmark drives the site as a
client of its models and commands would, and nothing in the site imports the benchmark."""

from __future__ import annotations

import os

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from benchmarks.web import actions  # deferred: importing models needs the app registry set up

    actions.main()


if __name__ == "__main__":
    main()
