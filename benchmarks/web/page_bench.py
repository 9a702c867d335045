"""Pages on a generated database, each a first visit and then 20 repeat visits (p50, p95), in this
process through Django's test client (no HTTP server; the cache is the settings' own).

    DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.page_bench /problems/1/ /kernels/1/
    DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.page_bench --cold /levels/1/
    DATABASE_URL=postgres://... .venv/bin/python -m benchmarks.web.page_bench --repeat 300 /api/v1/leaderboard/

`--cold`: instead, each URL asked three times with the cache cleared before each, so that every ask
builds a kept board (and the boards' catalogue and featured set) from the stored rows: a board's
build from nothing. Either way it only reads (a build writes nothing but the cache).

The database comes from `python -m benchmarks.web.bench generate --scale 1.3M` (benchmarks/web/run.sh
makes one and removes it; BENCH_DATABASE_URL keeps one)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPEAT = 20


def main(urls: list[str], cold: bool = False, repeat: int = REPEAT) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django  # deferred: settings first

    django.setup()
    from django.test import Client  # deferred: after setup

    client = Client(HTTP_HOST="localhost")
    if cold:
        built_from_nothing(client, urls)
        return
    for url in urls:
        started = time.perf_counter()
        assert client.get(url).status_code == 200, url
        first = (time.perf_counter() - started) * 1000
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            assert client.get(url).status_code == 200, url
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p95 = times[int(0.95 * repeat) - 1]
        print(f"{url}: first {first:.1f} ms, then p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms")


def built_from_nothing(client, urls: list[str]) -> None:
    from django.core.cache import cache  # deferred: after setup

    for url in urls:
        took = []
        for _ in range(3):
            cache.clear()
            started = time.perf_counter()
            assert client.get(url).status_code == 200, url
            took.append(f"{(time.perf_counter() - started) * 1000:.0f}")
        print(f"{url}: built from nothing in {', '.join(took)} ms")


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="page_bench", description="Pages' times on a generated database.")
    parser.add_argument("urls", nargs="*", default=["/problems/1/"])
    parser.add_argument("--cold", action="store_true", help="each URL built from nothing, three times")
    parser.add_argument("--repeat", type=int, default=REPEAT, help=f"repeat visits per URL (default {REPEAT})")
    args = parser.parse_intermixed_args(argv)
    if args.repeat < 1:
        parser.error("--repeat takes a number of visits, 1 or more")
    return args


if __name__ == "__main__":
    arguments = _arguments(sys.argv[1:])
    main(arguments.urls, arguments.cold, arguments.repeat)
