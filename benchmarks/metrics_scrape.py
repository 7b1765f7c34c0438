"""/metrics at scale: a private PostgreSQL database seeded with N runs (INSERT ... SELECT over
generate_series, so the counting triggers fire for every row, as they do for real writes), then
the p95 of warm scrapes through gunicorn and the queries one scrape costs.

    .venv/bin/python benchmarks/metrics_scrape.py [--runs 1000000] [--requests 200] [--json]

benchmarks/dashboard_load.py measures /metrics too, beside every page, in its 14-minute run.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POOLS = ("h200x2", "h100", "cpu", "mi300")
BENCHMARKS = 20
# every 5,000th run queued, a few failed and cancelled, the rest succeeded; the seven triggers in turn
STATE = ("CASE WHEN mod(g, 5000) = 0 THEN 'QUEUED' WHEN mod(g, 97) = 0 THEN 'FAILED' WHEN mod(g, 211) = 0 THEN 'CANCELLED' "
         "ELSE 'SUCCEEDED' END")
TRIGGER = "(ARRAY['webhook','api','form','schedule','pull','cli','import'])[1 + mod(g, 7)]"
FIXED = ("id", "state", "trigger", "created_at", "batch", "benchmark_id", "variant_id")


def seed(runs: int) -> float:
    """RUNS runs over BENCHMARKS benchmarks (one variant each) on four pools; returns seconds."""
    from django.core.management import call_command
    from django.db import connection

    from benchsite.bench.models import Benchmark, Run, Variant

    call_command("migrate", verbosity=0)
    template = None
    for i in range(BENCHMARKS):  # ids in a row: the template's + mod(g, BENCHMARKS)
        b = Benchmark.objects.create(name=f"b{i}", slug=f"b{i}", model="m", gpu_pool=POOLS[i % len(POOLS)])
        v = Variant.objects.create(benchmark=b, position=1, name="v")
        template = template or Run.objects.create(benchmark=b, variant=v, batch="0" * 32, state="SUCCEEDED")
    # the template's own values for every other column (Django's defaults are not the database's)
    columns = [connection.ops.quote_name(f.column) for f in Run._meta.concrete_fields if f.column not in FIXED]
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO bench_run ({', '.join(columns)}, benchmark_id, variant_id, state, \"trigger\", created_at, "
            f"batch) SELECT {', '.join(f't.{c}' for c in columns)}, "
            f"t.benchmark_id + mod(g, {BENCHMARKS}), t.variant_id + mod(g, {BENCHMARKS}), {STATE}, {TRIGGER}, "
            "now() - make_interval(secs => g * 30), md5(g::text)::uuid "
            "FROM bench_run t, generate_series(1, %s) g WHERE t.id = %s", [runs - 1, template.id])
        cursor.execute("ANALYZE")
    return time.perf_counter() - t0


def _check_counts(runs: int) -> None:
    """The triggers' counts are the runs' (one GROUP BY here, never in a scrape)."""
    from django.db.models import Count

    from benchsite.bench.models import Run
    from benchsite.metrics.models import RunCount

    counted = {(r.benchmark_id, r.state, r.trigger): r.n for r in RunCount.objects.filter(n__gt=0)}
    grouped = {(r["benchmark_id"], r["state"], r["trigger"]): r["n"] for r in
               Run.objects.order_by().values("benchmark_id", "state", "trigger").annotate(n=Count("id"))}
    assert counted == grouped and sum(counted.values()) == runs, "the run counts drifted from the runs"


def count_queries() -> tuple[int, str]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        text = Client().get("/metrics").content.decode()
    return len(captured), text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(requests: int) -> list[float]:
    """Milliseconds per warm scrape from gunicorn (one worker, production settings, plain HTTP)."""
    import httpx

    port = _free_port()
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "metrics-scrape-" * 4,
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_BEHIND_TLS_PROXY": "0"}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "-w", "1", "-b",
                               f"127.0.0.1:{port}", "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            for _ in range(100):
                try:
                    client.get("/metrics")
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
            times = []
            for i in range(5 + requests):
                t0 = time.perf_counter()
                client.get("/metrics").raise_for_status()
                if i >= 5:  # the first few warm the connection and the worker
                    times.append((time.perf_counter() - t0) * 1000)
            return sorted(times)
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="a PostgreSQL server")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    if args.runs < BENCHMARKS:
        parser.error(f"--runs must be at least {BENCHMARKS}")
    from benchmarks.pgdb import private_database

    with private_database(args.server, "metrics_scrape") as url:
        os.environ.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="benchsite.settings",
                          BENCH_METRICS_ALLOW="127.0.0.1/32", BENCH_VAR_DIR=os.environ.get("BENCH_VAR_DIR", "/tmp/metrics-scrape"))
        import django

        django.setup()
        seed_s = seed(args.runs)
        _check_counts(args.runs)
        queries, text = count_queries()
        times = measure(args.requests)
    result = {"runs": args.runs, "seed_s": round(seed_s, 1), "queries": queries, "requests": len(times),
              "p50_ms": round(times[len(times) // 2], 1), "p95_ms": round(times[int(0.95 * len(times))], 1),
              "max_ms": round(times[-1], 1), "kb": round(len(text) / 1024, 1),
              "series": sum(1 for line in text.splitlines() if line and not line.startswith("#")),
              "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    if not args.json:
        print(f"{args.runs} runs seeded in {result['seed_s']} s; a scrape: {queries} queries, p50 {result['p50_ms']} ms, "
              f"p95 {result['p95_ms']} ms, {result['kb']} KB (load average {result['load_avg_1m']})")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
