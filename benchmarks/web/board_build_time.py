"""How long a board takes to build from nothing on a generated database: each URL asked three
times in this process (Django's test client), the cache cleared before each ask, so every ask builds
the board (and the boards' catalogue and featured set) from the stored rows.

    DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.board_build_time URL [URL ...]

It only reads (a board's build writes nothing but the cache)."""

from __future__ import annotations

import os
import sys
import time


def main(urls: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: settings first

    django.setup()
    from django.conf import settings  # deferred: after setup
    from django.core.cache import cache  # deferred: after setup
    from django.test import Client  # deferred: after setup

    settings.ALLOWED_HOSTS = ["*"]
    client = Client()
    for url in urls:
        took = []
        for _ in range(3):
            cache.clear()
            started = time.perf_counter()
            status = client.get(url).status_code
            took.append(f"{(time.perf_counter() - started) * 1000:.0f}")
        print(f"{url}  {status}  built from nothing in {', '.join(took)} ms")


if __name__ == "__main__":
    main(sys.argv[1:] or ["/levels/1/?export=json", "/api/v1/leaderboard/?level=1", "/levels/1/", "/"])
