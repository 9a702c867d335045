"""Time pages over HTTP: sequential requests after warm-up (p50/p95 per URL, response size), then
N concurrent clients on chosen URLs (requests per second). Standard library only.

    python benchmarks/web/http_bench.py --base http://127.0.0.1:8800 --urls urls.txt \
        [--cookie sessionid=...] [--repeat 20] [--concurrent 8 --concurrent-urls / /levels/1/]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request

SIGNED_IN = ("/review/",)  # pages timed as a signed-in reviewer
#: The board pages every web benchmark times (bench_web's table, churn_bench's phases).
BOARD_PAGES = (
    "/",
    "/levels/1/",
    "/levels/2/",
    "/levels/3/",
    "/levels/all/",
    "/levels/1/?p=1.5",
    "/levels/1/?export=csv",
    "/levels/1/?export=json",
)


def fetch(base: str, url: str, cookie: str) -> tuple[int, int, float]:
    request = urllib.request.Request(base + url, headers={"X-Forwarded-Proto": "https"})
    if cookie and url.startswith(SIGNED_IN):
        request.add_header("Cookie", cookie)
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    return status, len(body), time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def sequential(base: str, urls: list[str], cookie: str, repeat: int) -> None:
    print(f"{'url':48} {'status':>6} {'kB':>7} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
    for url in urls:
        # The first two requests warm both gunicorn workers (each has its own board cache); the
        # first one's time is the uncached cost, shown apart.
        _, _, first = fetch(base, url, cookie)
        fetch(base, url, cookie)
        times, status, size = [], 0, 0
        for _ in range(repeat):
            status, size, seconds = fetch(base, url, cookie)
            times.append(seconds * 1000)
        p50, p95 = statistics.median(times), percentile(times, 0.95)
        print(f"{url[:48]:48} {status:>6} {size / 1000:>7.1f} {first * 1000:>9.1f} {p50:>8.1f} {p95:>8.1f}", flush=True)


def concurrent(base: str, url: str, clients: int, seconds: float) -> None:
    done = [0] * clients
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        while time.monotonic() < stop:
            fetch(base, url, "")
            done[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{clients} concurrent clients on {url}: {sum(done) / seconds:.1f} requests/s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--urls", required=True, help="file with one URL path per line")
    parser.add_argument("--cookie", default="")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--concurrent-seconds", type=float, default=10.0)
    parser.add_argument("--concurrent-urls", nargs="*", default=["/", "/levels/1/"])
    args = parser.parse_args()
    urls = [line.strip() for line in open(args.urls) if line.strip()]
    sequential(args.base, urls, args.cookie, args.repeat)
    for url in args.concurrent_urls:
        concurrent(args.base, url, args.concurrent, args.concurrent_seconds)


if __name__ == "__main__":
    main()
