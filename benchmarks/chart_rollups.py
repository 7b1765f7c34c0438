"""The chart JSON of one big benchmark served from its rolled-up series (bench.domain.rollups), right
after a result landed, against the same chart shaped from the raw tables.

Seeds RUNS runs (VARIANTS per commit, each commit with a build and its first-parent depth, 8
metrics per run) into a PostgreSQL database of its own, then ROUNDS times: stores a result (a run
and its measurement through the ORM in one transaction, as complete.py does; its series are
rebuilt when it commits), requests /api/benchmarks/<slug>/chart/ with Django's test client
(cold), counts its queries, requests it again (warm). Last, the chart shaped from the raw tables.

    .venv/bin/python benchmarks/chart_rollups.py --runs 50000 --json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUG = "big"
METRICS = ("decode_tok_s", "ttft_ms", "itl_ms_p99", "allreduce_share", "allreduce_us_per_call", "correct",
           "tpot_ms", "peak_memory_gb")


def _seed(runs: int, variants: int) -> float:
    """Seed the runs with bulk_create (no signals: the rollups are built by bench_rollup after)."""
    from django.core.management import call_command
    from django.db import connection

    from benchsite.bench.models import Benchmark, Build, EngineSource, Measurement, Run, Variant

    started = time.perf_counter()
    source = EngineSource.objects.create(name="vllm", kind="git", default_ref="main")
    benchmark = Benchmark.objects.create(name=SLUG, slug=SLUG, model="m", engine_source=source)
    steps = [Variant.objects.create(benchmark=benchmark, position=i + 1, name=f"v{i}") for i in range(variants)]
    commits = runs // variants
    builds = Build.objects.bulk_create([Build(commit=f"{c:040x}", first_parent_depth=c + 1, path="source")
                                        for c in range(commits)], batch_size=5000)
    rows = [Run(benchmark=benchmark, variant=v, batch=uuid.uuid4(), state="SUCCEEDED", commit=f"{c:040x}",
                branch="main", trigger="webhook", build=builds[c]) for c in range(commits) for v in steps]
    rows = Run.objects.bulk_create(rows, batch_size=5000)
    batch = []
    for i, run in enumerate(rows):
        for metric in METRICS:
            value = 1.0 if metric == "correct" else 100.0 + i % 97
            batch.append(Measurement(run=run, metric=metric, value=value, ci_low=value - 1, ci_high=value + 1))
        if len(batch) >= 40000:
            Measurement.objects.bulk_create(batch)
            batch = []
    Measurement.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    call_command("bench_rollup", stdout=open(os.devnull, "w"))
    return time.perf_counter() - started


def _land_result(benchmark) -> float:
    from django.db import transaction

    from benchsite.bench.models import Measurement, Run

    started = time.perf_counter()
    with transaction.atomic():
        run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.first(), batch=uuid.uuid4(),
                                 state="SUCCEEDED", commit=uuid.uuid4().hex * 2, branch="main", trigger="webhook")
        Measurement.objects.create(run=run, metric="decode_tok_s", value=123.0)
    return time.perf_counter() - started


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _measure(rounds: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from benchsite.bench.models import Benchmark

    benchmark, client = Benchmark.objects.get(slug=SLUG), Client()
    url = f"/api/benchmarks/{SLUG}/chart/"
    writes, cold, warm, queries, size = [], [], [], set(), 0
    client.get(url)  # warm-up: the first request imports and compiles what every later one reuses
    for _ in range(rounds):
        writes.append(_land_result(benchmark))
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = client.get(url)
            cold.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        queries.add(len(ctx))
        size = len(response.content)
        started = time.perf_counter()
        client.get(url)
        warm.append(time.perf_counter() - started)
    return {"cold_ms_median": _ms(statistics.median(cold)), "cold_p95_ms": _ms(_p95(cold)),
            "warm_p95_ms": _ms(_p95(warm)), "queries": sorted(queries), "bytes": size,
            "write_with_rebuild_ms_median": _ms(statistics.median(writes))}


def _raw_path(rounds: int) -> float:
    from django.core.cache import cache

    from benchsite.bench.models import Benchmark
    from benchsite.bench.domain import chart_series as history

    benchmark = Benchmark.objects.select_related("engine_source").get(slug=SLUG)
    times = []
    for _ in range(rounds):
        cache.clear()
        started = time.perf_counter()
        history.benchmark_history_json(benchmark=benchmark, metric="decode_tok_s")
        times.append(time.perf_counter() - started)
    return _ms(statistics.median(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50000)
    parser.add_argument("--variants", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.runs < args.variants or args.variants < 1 or args.rounds < 1:
        parser.error("--runs must be at least --variants, both and --rounds at least 1")
    sys.path.insert(0, str(ROOT))
    from benchmarks.pgdb import private_database

    with private_database(args.server, "rollups_chart") as url:
        os.environ["DATABASE_URL"] = url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        seed_s = _seed(args.runs, args.variants)
        figures = {"runs": args.runs, "seed_s": round(seed_s, 1), **_measure(args.rounds),
                   "raw_path_ms_median": _raw_path(min(args.rounds, 5)), "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
