"""Dashboard load: seed a fresh SQLite database with RUNS runs (batches of 5 variants, 8
metrics each, a commit per batch) under $BENCH_VAR_DIR, serve it with gunicorn (one worker),
request every page as one client and report the p95 latency and the SQL query count of each
page, and the query count of the same page with 100 runs.

    .venv/bin/python benchmarks/dashboard_load.py --runs 10000 --json

prints {"pages": {NAME: {"p95_ms", "cpu_ms", "queries", "queries_at_100"}}}: cpu_ms is the gunicorn
worker's CPU time per request (user + system), a figure that other jobs on a shared machine
inflate far less than the wall-clock p95; the 1-minute load average is printed with it.
"""
from __future__ import annotations

import argparse
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
VARIANTS = (("eager", ["--enforce-eager"], {}), ("CUDA graphs", [], {}), ("NCCL LL", [], {"NCCL_PROTO": "LL"}),
            ("NCCL LL128", [], {"NCCL_PROTO": "LL128"}), ("fused", [], {}))
BASE_TOK_S = (20.0, 43.0, 57.6, 55.0, 60.0)


def _django(db_path: Path):
    os.environ["DATABASE_URL"] = f"sqlite:///{db_path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def seed(runs: int) -> dict:
    """Bulk-insert the history; returns the ids the pages need."""
    from django.core.management import call_command

    from benchsite.bench.lifecycle import results
    from benchsite.bench.models import Annotation, Benchmark, Measurement, Run, Variant

    call_command("migrate", verbosity=0)
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
        step = 1000 / tok_s
        for metric, value, ci in (("decode_tok_s", tok_s, (tok_s * .99, tok_s * 1.01)), ("ttft_ms", step * 3, None),
                                  ("itl_ms_p50", step, None), ("itl_ms_p90", step * 1.05, None),
                                  ("itl_ms_p99", step * 1.2, None), ("allreduce_share", 0.3, None),
                                  ("allreduce_us_per_call", 40.0, None), ("correct", 1.0 if i % 97 else 0.0, None)):
            measurements.append(Measurement(run_id=run["id"], metric=metric, value=value, ci_low=ci and ci[0],
                                            ci_high=ci and ci[1], samples=[value] * 5))
    Measurement.objects.bulk_create(measurements, batch_size=5000)
    last = Run.objects.order_by("-id").first()
    results.artifact_create(run=last, kind="server_log", name="server.log",
                             content="\n".join(f"INFO {i}" for i in range(500)))
    Annotation.objects.create(benchmark=benchmark, text="enabled CUDA graphs", commit=last.commit[:10])
    first = Run.objects.filter(variant=last.variant).order_by("id").first()
    return {"slug": benchmark.slug, "run": last.pk, "other": first.pk}


def pages(ids: dict) -> dict[str, str]:
    slug, run = ids["slug"], ids["run"]
    return {"home": "/", "benchmark": f"/b/{slug}/", "chart_json": f"/api/benchmarks/{slug}/chart/?metric=decode_tok_s",
            "waterfall": f"/b/{slug}/waterfall/", "run": f"/runs/{run}/", "run_json": f"/api/runs/{run}/",
            "compare": f"/compare/?a={ids['other']}&b={run}"}


def count_queries(urls: dict[str, str]) -> dict[str, int]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client, counts = Client(), {}
    for name, url in urls.items():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200, url
        counts[name] = len(ctx)
    return counts


def _prepare(db_path: Path, runs: int) -> None:
    """In a child process: seed DB_PATH, print the page URLs and their query counts as JSON."""
    _django(db_path)
    urls = pages(seed(runs))
    print(json.dumps({"urls": urls, "queries": count_queries(urls)}))


def _child(db_path: Path, runs: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--prepare", str(db_path), "--runs", str(runs)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(proc) -> float:
    """CPU seconds used so far by the gunicorn worker(s) under the master PROC."""
    return sum(sum(child.cpu_times()[:2]) for child in proc.children(recursive=True))


def measure(db_path: Path, urls: dict[str, str], requests: int) -> tuple[dict[str, float], dict[str, float]]:
    """(p95 ms, mean server CPU ms) per page: the CPU figure holds on a machine other jobs load."""
    import httpx
    import psutil

    port = _free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db_path}", "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": "dashboard-load",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
           # plain HTTP on loopback: no redirect to HTTPS (production settings assume a TLS proxy)
           "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_BEHIND_TLS_PROXY": "0"}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}",
                               "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(100):
                try:
                    client.get("/")
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
            p95, cpu, master = {}, {}, psutil.Process(server.pid)
            for name, url in urls.items():
                for _ in range(3):  # warm caches
                    client.get(url).raise_for_status()
                times, cpu0 = [], _cpu_s(master)
                for _ in range(requests):
                    t0 = time.perf_counter()
                    client.get(url).raise_for_status()
                    times.append((time.perf_counter() - t0) * 1000)
                cpu[name] = round((_cpu_s(master) - cpu0) * 1000 / requests, 1)
                times.sort()
                p95[name] = round(times[min(len(times) - 1, int(0.95 * len(times)))], 1)
            return p95, cpu
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=40, help="requests per page")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare:
        _prepare(args.prepare, args.runs)
        return 0
    base = Path(os.environ.get("BENCH_VAR_DIR", ROOT / "var")) / "dashboard_load"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    small = _child(base / "db-100.sqlite3", 100)
    big = _child(base / f"db-{args.runs}.sqlite3", args.runs)
    p95, cpu = measure(base / f"db-{args.runs}.sqlite3", big["urls"], args.requests)
    result = {"runs": args.runs, "load_avg_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
              "pages": {name: {"p95_ms": p95[name], "cpu_ms": cpu[name], "queries": big["queries"][name],
                               "queries_at_100": small["queries"][name]} for name in big["urls"]}}
    if not args.json:
        print(f"load average {result['load_avg_1m']} on {result['cpus']} CPUs (other jobs inflate p95; cpu_ms less so)")
        for name, row in result["pages"].items():
            print(f"{name:12s} p95 {row['p95_ms']:7.1f} ms  server CPU {row['cpu_ms']:6.1f} ms/request  "
                  f"queries {row['queries']} (at 100 runs: {row['queries_at_100']})")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
