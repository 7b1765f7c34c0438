"""Dashboard load: seed a fresh database with RUNS runs (batches of 5 variants, 8 metrics each,
a commit per batch), serve it with gunicorn (one worker), request every page as one client and
report the p95 latency and the SQL query count of each page, and the query count of the same
page with 100 runs.

    .venv/bin/python benchmarks/dashboard_load.py --runs 10000 --json
    .venv/bin/python benchmarks/dashboard_load.py --runs 1000000 --postgres --json

SQLite (the default): one benchmark under $BENCH_VAR_DIR, seeded with bulk_create. --postgres:
private databases on the server of --postgres (default postgres://postgres@127.0.0.1:5432,
created and dropped, benchmarks/pgdb.py), 20 benchmarks written with COPY
(benchmarks/history_copy.py); it reports the seeding time and the database's size too.

prints {"pages": {NAME: {"p95_ms", "cold_p95_ms", "cpu_ms", "queries", "queries_at_100", "kb"}}}:
p95_ms is warm (the same page again); cold_p95_ms is measured with a new result landing before
each request (stored as lifecycle.complete stores a worker's result, untimed), so every cache
keyed on the data misses; cpu_ms is the gunicorn worker's CPU time per request (user +
system), a figure that other jobs on a shared machine inflate far less than the wall-clock p95
(the 1-minute load average is printed with it); kb is the response's size on the wire,
gzip-compressed as a browser asks for it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # benchmarks.* and benchsite.*
VARIANTS = (("eager", ["--enforce-eager"], {}), ("CUDA graphs", [], {}), ("NCCL LL", [], {"NCCL_PROTO": "LL"}),
            ("NCCL LL128", [], {"NCCL_PROTO": "LL128"}), ("fused", [], {}))
BASE_TOK_S = (20.0, 43.0, 57.6, 55.0, 60.0)
PG_BENCHMARKS = 20
ADMIN = ("admin", "dashboard-load-admin")
SECRET_KEY = "dashboard-load"
METRICS_ALLOW = "127.0.0.1/32"  # Prometheus' scrape of /metrics, from loopback


def _django(database_url: str):
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SECRET_KEY"] = SECRET_KEY  # the server's: it checks the admin's session
    os.environ["BENCH_METRICS_ALLOW"] = METRICS_ALLOW  # /metrics for the test client (127.0.0.1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()


def seed(runs: int) -> dict:
    """Bulk-insert the history of one benchmark (SQLite); returns the ids the pages need."""
    from benchsite.bench.models import Benchmark, Measurement, Run, Variant
    from benchsite.bench.domain import home_cache
    from benchmarks.history_copy import figures

    benchmark = Benchmark.objects.create(name="Llama 8B TP2 H200", slug="load", model="/models/llama-8b",
                                         tensor_parallel_size=2, gpu_pool="h200x2")
    variants = [Variant.objects.create(benchmark=benchmark, position=i + 1, name=n, flags=f, env=e, is_reference=i == 0)
                for i, (n, f, e) in enumerate(VARIANTS)]
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    batches = max(1, runs // len(variants))
    rows = []
    for b in range(batches):
        batch, commit, t = uuid.uuid4(), f"{b:08x}" + uuid.uuid4().hex, start + timedelta(hours=b)
        for v in variants[: runs - b * len(variants)]:
            rows.append(Run(benchmark=benchmark, variant=v, batch=batch, state=Run.State.SUCCEEDED, commit=commit,
                            created_at=t, started_at=t, finished_at=t + timedelta(minutes=5), worker_host="gpu-1"))
    Run.objects.bulk_create(rows, batch_size=2000)
    measurements = []
    for i, run in enumerate(Run.objects.order_by("id").values("id", "variant__position")):
        tok_s = BASE_TOK_S[run["variant__position"] - 1] * (1 + 0.02 * ((i * 7919) % 13 - 6) / 6)
        for metric, value, low, high in figures(tok_s, i):
            measurements.append(Measurement(run_id=run["id"], metric=metric, value=value, ci_low=low, ci_high=high,
                                            samples=[value] * 5))
    Measurement.objects.bulk_create(measurements, batch_size=5000)
    home_cache.note_changes([benchmark.pk])  # bulk_create sends no signal: the home page recomputes it
    return {"benchmarks": [benchmark], "variants": [variants]}


def _pull_request(benchmark, variants) -> str:
    """A watched repository's open pull request compared on BENCHMARK: its page's path."""
    from benchsite.bench.models import Run
    from benchsite.integrations.models import RepoWatch
    from benchsite.integrations.pulls.models import Comparison, PullRequest, PullRun

    watch = RepoWatch.objects.create(repo_url="https://github.com/acme/vllm", branches=["main"], secret_env="X")
    watch.benchmarks.set([benchmark])
    head = uuid.uuid4().hex + "0" * 8
    pull = PullRequest.objects.create(watch=watch, provider="github", repo_key="github.com/acme/vllm", number=12,
                                      title="Fuse RMSNorm", author="alice", base_branch="main", head_sha=head)
    comparison = Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha=head, base_branch="main",
                                           state="done", outcome="passed")
    base = Run.objects.filter(variant=variants[0]).order_by("-id").first()
    run = Run.objects.create(benchmark=benchmark, variant=variants[0], batch=uuid.uuid4(), state="SUCCEEDED", commit=head)
    PullRun.objects.create(run=base, comparison=comparison, role="base")
    PullRun.objects.create(run=run, comparison=comparison, role="head")
    return "/pr/github.com/acme/vllm/12/"


def prepare(runs: int, postgres: bool) -> dict:
    """Migrate, seed RUNS runs, add what the other pages show; returns the ids the pages need."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from benchsite.bench.lifecycle import results
    from benchsite.bench.models import Annotation, Run
    from benchmarks.history_copy import seed_copy

    call_command("migrate", verbosity=0)
    t0 = time.perf_counter()
    made = (seed_copy(runs, PG_BENCHMARKS, BASE_TOK_S, VARIANTS) if postgres else seed(runs))
    seed_s = time.perf_counter() - t0
    benchmark, variants = made["benchmarks"][0], made["variants"][0]
    last = Run.objects.filter(benchmark=benchmark).order_by("-id").first()
    results.artifact_create(run=last, kind="server_log", name="server.log",
                            content="\n".join(f"INFO {i}" for i in range(500)))
    Annotation.objects.create(benchmark=benchmark, text="enabled CUDA graphs", commit=last.commit[:10])
    first = Run.objects.filter(variant=last.variant).order_by("id").first()
    pull = _pull_request(benchmark, variants)
    get_user_model().objects.create_superuser(ADMIN[0], "admin@example.com", ADMIN[1])
    return {"slug": benchmark.slug, "run": last.pk, "other": first.pk, "pull": pull, "commit": last.commit[:12],
            "seed_s": round(seed_s, 1)}


def pages(ids: dict) -> dict[str, str]:
    slug, run = ids["slug"], ids["run"]
    return {"home": "/", "benchmark": f"/b/{slug}/", "chart_json": f"/api/benchmarks/{slug}/chart/?metric=decode_tok_s",
            "waterfall": f"/b/{slug}/waterfall/", "run": f"/runs/{run}/", "run_json": f"/api/runs/{run}/",
            "compare": f"/compare/?a={ids['other']}&b={run}", "runs_api": f"/api/runs/?benchmark={slug}",
            "runs_api_commit": f"/api/runs/?commit={ids['commit']}", "commit_api": f"/api/commits/{ids['commit']}/",
            "pull": ids["pull"], "changes": f"/b/{slug}/changes/", "marks_json": f"/api/benchmarks/{slug}/marks/",
            "admin_runs": "/admin/bench/run/", "admin_measurements": "/admin/bench/measurement/",
            "admin_verdicts": "/admin/regressions/verdict/"}


def _admin_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=ADMIN[0]))
    return client


def count_queries(urls: dict[str, str]) -> dict[str, int]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    anonymous, admin, counts = Client(), _admin_client(), {}
    for name, url in urls.items():
        with CaptureQueriesContext(connection) as ctx:
            assert (admin if url.startswith("/admin/") else anonymous).get(url).status_code == 200, url
        counts[name] = len(ctx)
    return counts


def database_size() -> dict:
    """PostgreSQL: the database's bytes and the biggest tables' (indexes and TOAST included)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        total = cursor.fetchone()[0]
        cursor.execute("SELECT relname, pg_total_relation_size(oid), pg_indexes_size(oid) FROM pg_class "
                       "WHERE relkind = 'r' AND relname LIKE 'bench_%%' ORDER BY 2 DESC LIMIT 4")
        tables = {name: {"mb": round(size / 2**20, 1), "indexes_mb": round(indexes / 2**20, 1)}
                  for name, size, indexes in cursor.fetchall()}
    return {"database_mb": round(total / 2**20, 1), "tables": tables}


def _prepare(database_url: str, runs: int, postgres: bool) -> None:
    """In a child process: seed DATABASE_URL, print the page URLs and their query counts as JSON."""
    _django(database_url)
    ids = prepare(runs, postgres)
    urls = {**pages(ids), "metrics": "/metrics"}  # Prometheus' scrape, beside the pages people read
    out = {"urls": urls, "queries": count_queries(urls), "seed_s": ids["seed_s"]}
    if postgres:
        out["size"] = database_size()
    print(json.dumps(out))


def _child(database_url: str, runs: int, postgres: bool) -> dict:
    out = subprocess.run([sys.executable, __file__, "--prepare", database_url, "--runs", str(runs)]
                         + (["--postgres"] if postgres else []),
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(proc) -> float:
    """CPU seconds used so far by the gunicorn worker(s) under the master PROC."""
    return sum(sum(child.cpu_times()[:2]) for child in proc.children(recursive=True))


def land_result(slug: str, i: int) -> None:
    """A new result of benchmark SLUG stored as a worker's is (lifecycle.complete._store_result:
    its measurements, the run SUCCEEDED), with figures like the history's. Its judgement is left
    out: judging reads each series whole (regressions/series.py), ~55 s at 1,000,000 runs."""
    from django.db import transaction

    from benchsite.bench.lifecycle.complete import _store_result
    from benchsite.bench.models import Run, Variant
    from benchmarks.history_copy import figures
    from runners.contract import JobResult

    variant = Variant.objects.filter(benchmark__slug=slug).order_by("position")[i % len(VARIANTS)]
    tok_s = BASE_TOK_S[variant.position - 1]
    result = JobResult.from_dict({"measurements": [{"metric": m, "value": v, "samples": [v] * 5, "ci_low": low,
                                                    "ci_high": high} for m, v, low, high in figures(tok_s, i + 1)]})
    with transaction.atomic():
        run = Run.objects.create(benchmark_id=variant.benchmark_id, variant=variant, batch=uuid.uuid4(), state="RUNNING",
                                 commit=uuid.uuid4().hex + "0" * 8, task_id=f"load-{i}", worker_host="gpu-1")
        _store_result(run, result)


def _p95(times: list[float]) -> float:
    times = sorted(times)
    return round(times[min(len(times) - 1, int(0.95 * len(times)))], 1)


def measure(database_url: str, urls: dict[str, str], requests: int, cold_requests: int, slug: str) -> dict:
    """Per page: warm p95 ms, cold p95 ms (a result lands before each), mean server CPU ms of the
    warm requests (the CPU figure holds on a machine other jobs load) and KB on the wire."""
    import httpx
    import psutil

    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET_KEY,
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
           # plain HTTP on loopback: no redirect to HTTPS (production settings assume a TLS proxy)
           "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_BEHIND_TLS_PROXY": "0",
           # one client asks for the API pages ~60 times a minute each: measured, not rate-limited
           "BENCH_API_REQUESTS_PER_MIN": "1000000", "BENCH_METRICS_ALLOW": METRICS_ALLOW}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}",
                               "--log-level", "warning"], cwd=ROOT, env=env)
    session = _admin_client().cookies["sessionid"].value  # the admin pages' login
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                          headers={"accept-encoding": "gzip"}) as client:
            for _ in range(100):
                try:
                    client.get("/")
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
            rows, master, landed = {}, psutil.Process(server.pid), 0
            for name, url in urls.items():
                cookies = {"sessionid": session} if url.startswith("/admin/") else {}

                def get():
                    response = client.get(url, cookies=cookies)
                    response.raise_for_status()
                    return response

                for _ in range(3):  # warm caches
                    size = get().num_bytes_downloaded
                times, cpu0 = [], _cpu_s(master)
                for _ in range(requests):
                    t0 = time.perf_counter()
                    get()
                    times.append((time.perf_counter() - t0) * 1000)
                cpu = (_cpu_s(master) - cpu0) * 1000 / requests
                cold = []
                for _ in range(cold_requests):
                    land_result(slug, landed)
                    landed += 1
                    t0 = time.perf_counter()
                    get()
                    cold.append((time.perf_counter() - t0) * 1000)
                rows[name] = {"p95_ms": _p95(times), "cold_p95_ms": _p95(cold) if cold else None,
                              "cpu_ms": round(cpu, 1), "kb": round(size / 1024, 1)}
            return rows
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40, help="warm requests per page")
    parser.add_argument("--cold-requests", type=int, default=20, help="requests per page after a new result")
    parser.add_argument("--postgres", nargs="?", const="postgres://postgres@127.0.0.1:5432", default=None,
                        metavar="SERVER", help="seed private PostgreSQL databases on SERVER (COPY, 20 benchmarks)")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare:
        _prepare(args.prepare, args.runs, args.postgres is not None)
        return 0
    with contextlib.ExitStack() as stack:
        if args.postgres:
            from benchmarks.pgdb import private_database

            small_url = stack.enter_context(private_database(args.postgres, "scale_dashboard_small"))
            big_url = stack.enter_context(private_database(args.postgres, "scale_dashboard"))
        else:
            base = Path(os.environ.get("BENCH_VAR_DIR", ROOT / "var")) / "dashboard_load"
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            small_url, big_url = f"sqlite:///{base / 'db-100.sqlite3'}", f"sqlite:///{base / f'db-{args.runs}.sqlite3'}"
        small = _child(small_url, 100, args.postgres is not None)
        big = _child(big_url, args.runs, args.postgres is not None)
        _django(big_url)
        measured = measure(big_url, big["urls"], args.requests, args.cold_requests, "load")
    result = {"runs": args.runs, "database": "postgresql" if args.postgres else "sqlite", "seed_s": big["seed_s"],
              "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
              "pages": {name: {**measured[name], "queries": big["queries"][name],
                               "queries_at_100": small["queries"][name]} for name in big["urls"]}}
    if "size" in big:
        result["size"] = {**big["size"], "kb_per_1000_runs": round(big["size"]["database_mb"] * 1024 * 1000 / args.runs)}
    if not args.json:
        print(f"load average {result['load_avg_1m']} on {result['cpus']} CPUs (other jobs inflate p95; cpu_ms less so); "
              f"seeded in {result['seed_s']} s")
        for name, row in result["pages"].items():
            print(f"{name:18s} p95 {row['p95_ms']:7.1f} ms  cold {row['cold_p95_ms']} ms  server CPU {row['cpu_ms']:6.1f} "
                  f"ms/request  {row['kb']} KB  queries {row['queries']} (at 100 runs: {row['queries_at_100']})")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
