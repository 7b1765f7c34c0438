"""The home page's per-benchmark cache, side by side: CPU ms per request of the page served from the
cache (warm), right after one result landed (its benchmark recomputed, the others cached), and
with the cache emptied before each request (every benchmark recomputed and stored: the page as it
was before the cache, plus the store).

    .venv/bin/python benchmarks/home_summaries.py --runs 100000 --json

Seeds RUNS runs into a private PostgreSQL database on --postgres (default
postgres://postgres@127.0.0.1:5432; created and dropped, benchmarks/pgdb.py): 20 benchmarks x 5
variants with COPY (benchmarks/history_copy.py), as benchmarks/dashboard_load.py --postgres does.
Then requests `/` in this process with Django's test client (DJANGO_DEBUG=0, the web process's
connection settings from benchsite.wsgi, gzip accepted), the three kinds in turn, ROUNDS times:

- warm: nothing changed since the previous request;
- one result: a result of the first benchmark stored as a worker's is (dashboard_load.land_result,
  untimed), then the request;
- uncached: Django's cache emptied (untimed), then the request.

cpu_ms is this process's CPU time (user + system) per request: PostgreSQL's own time is not in it
(wall_ms is); other jobs on a shared machine inflate it far less than wall-clock time. It prints
each kind's mean and median CPU ms, wall-clock median and p95, queries, and the ratios of the
uncached page's CPU to the other two; `same_page` says whether the three bodies were the same
page (the cached one equals the computed one)."""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks.* and benchsite.*


def _setup(database_url: str) -> None:
    os.environ.update({"DATABASE_URL": database_url, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "home-summaries",
                       "DJANGO_ALLOWED_HOSTS": "testserver", "DJANGO_SECURE_SSL_REDIRECT": "0",
                       "DJANGO_BEHIND_TLS_PROXY": "0", "DJANGO_SETTINGS_MODULE": "benchsite.settings"})
    os.environ.pop("BENCH_CACHE_URL", None)  # the per-process cache, as a web worker without Redis has
    import django

    django.setup()


def _p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def measure(rounds: int, slug: str) -> dict:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    import benchsite.wsgi  # noqa: F401 - the web process's connection settings and gc.freeze()
    from benchmarks.dashboard_load import land_result

    client = Client(HTTP_ACCEPT_ENCODING="gzip")
    bodies: dict[str, bytes] = {}

    def get() -> bytes:
        response = client.get("/")
        assert response.status_code == 200, response.status_code
        body = response.content
        return gzip.decompress(body) if response.get("Content-Encoding") == "gzip" else body

    def before(kind: str, i: int) -> None:
        if kind == "one_result":
            land_result(slug, i)
        elif kind == "uncached":
            cache.clear()

    kinds = ("warm", "one_result", "uncached")
    for i in range(3):  # warm-up: imports, templates, connections
        before("uncached", 0)
        get()
    cpu = {k: [] for k in kinds}
    wall = {k: [] for k in kinds}
    landed = 0
    for _ in range(rounds):
        for kind in kinds:
            before(kind, landed)
            landed += kind == "one_result"
            c0, w0 = time.process_time(), time.perf_counter()
            body = get()
            cpu[kind].append((time.process_time() - c0) * 1000)
            wall[kind].append((time.perf_counter() - w0) * 1000)
    queries = {}
    for kind in kinds:
        before(kind, landed)
        landed += kind == "one_result"
        with CaptureQueriesContext(connection) as ctx:
            body = get()
        queries[kind] = len(ctx)
        bodies[kind] = body
    # the same data three ways: one benchmark recomputed (above), every one (above), none (now)
    same = len({bodies["one_result"], bodies["uncached"], get()}) == 1
    rows = {k: {"cpu_ms_mean": round(statistics.mean(cpu[k]), 2), "cpu_ms_median": round(statistics.median(cpu[k]), 2),
                "wall_ms_median": round(statistics.median(wall[k]), 1), "wall_ms_p95": round(_p95(wall[k]), 1),
                "queries": queries[k]} for k in kinds}
    ratios = {"uncached_over_warm": round(rows["uncached"]["cpu_ms_mean"] / rows["warm"]["cpu_ms_mean"], 1),
              "uncached_over_one_result": round(rows["uncached"]["cpu_ms_mean"] / rows["one_result"]["cpu_ms_mean"], 1),
              "one_result_over_warm": round(rows["one_result"]["cpu_ms_mean"] / rows["warm"]["cpu_ms_mean"], 1)}
    return {"requests": rows, "cpu_ratios": ratios, "same_page": same, "results_landed": landed}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=40, help="requests of each kind")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", metavar="SERVER")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)

    from benchmarks.dashboard_load import BASE_TOK_S, PG_BENCHMARKS, VARIANTS
    from benchmarks.pgdb import private_database

    with private_database(args.postgres, "scale_home") as url:
        _setup(url)
        from django.core.management import call_command

        from benchmarks.history_copy import seed_copy

        call_command("migrate", verbosity=0)
        t0 = time.perf_counter()
        seed_copy(args.runs, PG_BENCHMARKS, BASE_TOK_S, VARIANTS)
        seed_s = time.perf_counter() - t0
        measured = measure(args.rounds, "load")
    result = {"runs": args.runs, "benchmarks": PG_BENCHMARKS, "variants": PG_BENCHMARKS * len(VARIANTS),
              "database": "postgresql", "seed_s": round(seed_s, 1), "load_avg_1m": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count(), **measured}
    if not args.json:
        print(f"{args.runs} runs, {result['variants']} variants; load average {result['load_avg_1m']} on "
              f"{result['cpus']} CPUs; seeded in {result['seed_s']} s")
        for kind, row in result["requests"].items():
            print(f"{kind:11s} CPU {row['cpu_ms_mean']:6.1f} ms/request (median {row['cpu_ms_median']:.1f})  wall median "
                  f"{row['wall_ms_median']:.1f} p95 {row['wall_ms_p95']:.1f} ms  queries {row['queries']}")
        print("CPU ratios:", ", ".join(f"{k} {v}x" for k, v in result["cpu_ratios"].items()),
              "; same page cached and computed:", result["same_page"])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
