"""The dashboard under 50 concurrent users, served by gunicorn on PostgreSQL.

    .venv/bin/python benchmarks/dashboard_users.py [--users 50] [--rounds 4] [--think-s 0] [--runs 10000]
                                                   [--workers 4] [--json]

It creates a database of its own on the PostgreSQL server (`--postgres`, default the local test
server; dropped after), seeds it as benchmarks/dashboard_load.py does (RUNS runs in batches of
5 variants, 8 metrics each, a server log, an annotation), starts gunicorn with production
settings (DJANGO_DEBUG=0) on a free port, then lets USERS clients loose at once, each with its
own connection: half are logged-in members (a session of their own), half anonymous. Each
user requests every dashboard page (home, benchmark, chart JSON, waterfall, run page, run
JSON, compare) ROUNDS times in its own shuffled order; before its first request and between two
it waits a random 0 to 2 x THINK_S (default 0: all start at once and every user always has a
request in flight, the worst case). Each page is requested a few times first (not counted), as
a running server has warm caches.
Prints p50/p95/max latency per page and over all, requests per second and errors (any status
but 200, or a transport error): the bar is 0 errors.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECRET_KEY = "dashboard-users-benchmark"


def _setup(database_url: str, artifacts_dir: Path, runs: int, members: int) -> tuple[dict, list[str]]:
    """Migrate and seed; return the page URLs and one session cookie per member."""
    os.environ.update(DATABASE_URL=database_url, DJANGO_SECRET_KEY=SECRET_KEY, BENCH_ARTIFACTS_DIR=str(artifacts_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django

    django.setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    from benchmarks.dashboard_load import pages, seed

    urls = pages(seed(runs))
    sessions = []
    for i in range(members):
        user = get_user_model().objects.create_user(f"member{i}", password=None)
        session = SessionStore()
        session.update({SESSION_KEY: str(user.pk), BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
                        HASH_SESSION_KEY: user.get_session_auth_hash()})
        session.create()
        sessions.append(session.session_key)
    return urls, sessions


def _user(base: str, urls: dict, rounds: int, think_s: float, session: str | None, seed: int, start: threading.Event,
          out: list):
    rng = random.Random(seed)
    plan = [name for name in urls for _ in range(rounds)]
    rng.shuffle(plan)
    cookies = {"sessionid": session} if session else None
    with httpx.Client(base_url=base, cookies=cookies, timeout=60) as client:
        start.wait()
        time.sleep(rng.uniform(0, 2 * think_s))  # arrivals spread over one think time
        for name in plan:
            t0 = time.perf_counter()
            try:
                response = client.get(urls[name])
                status = response.status_code
                if status == 200 and session and name == "benchmark":
                    assert '/trigger/"' in response.text, "a member should see the trigger form"
            except (httpx.HTTPError, AssertionError) as exc:
                status = type(exc).__name__
            out.append((name, status, time.perf_counter() - t0))
            time.sleep(rng.uniform(0, 2 * think_s))


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] * 1e3, 1)


def _load(args, urls: dict, sessions: list[str], env: dict, log: Path) -> dict:
    from tests.faults.harness import free_port

    port = free_port()
    gunicorn = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "--bind", f"127.0.0.1:{port}",
                                 "--workers", str(args.workers), "--log-level", "warning"], cwd=ROOT,
                                env={**env, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}, stdout=open(log, "wb"),
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + urls["run_json"], timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or gunicorn.poll() is not None:
                raise RuntimeError(f"gunicorn did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        with httpx.Client(base_url=base, timeout=60) as warm:  # every page, about once per gunicorn worker
            for _ in range(args.workers):
                for url in urls.values():
                    warm.get(url)
        results: list = []
        start = threading.Event()
        threads = [threading.Thread(target=_user, args=(base, urls, args.rounds, args.think_s,
                                                         sessions[i] if i < len(sessions) else None, i, start, results))
                   for i in range(args.users)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # every user connected and waiting: they start together
        t0 = time.perf_counter()
        start.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - t0
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)
    latencies = [t for _, _, t in results]
    errors = [(name, status) for name, status, _ in results if status != 200]
    return {
        "users": args.users, "members": len(sessions), "rounds": args.rounds, "think_s": args.think_s,
        "runs_seeded": args.runs, "gunicorn_workers": args.workers, "requests": len(results),
        "seconds": round(elapsed, 1), "requests_per_s": round(len(results) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1e3, 1), "p95_ms": _p(latencies, 0.95),
        "max_ms": round(max(latencies) * 1e3, 1), "errors": len(errors),
        "error_kinds": sorted({str(s) for _, s in errors}),
        "pages": {name: {"p50_ms": _p([t for n, _, t in results if n == name], 0.5),
                         "p95_ms": _p([t for n, _, t in results if n == name], 0.95)} for name in urls},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4, help="times each user requests each page")
    parser.add_argument("--think-s", type=float, default=0.0, help="mean pause between a user's requests")
    parser.add_argument("--runs", type=int, default=10000, help="runs in the seeded history")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.users < 1 or args.rounds < 1 or args.runs < 5 or args.think_s < 0:
        parser.error("--users and --rounds must be at least 1, --runs at least 5, --think-s not negative")

    from benchmarks.pgdb import private_database

    with tempfile.TemporaryDirectory(prefix="dashboard-users-") as tmp, \
            private_database(args.postgres, "bench_dashboard") as database_url:
        t0 = time.perf_counter()
        urls, sessions = _setup(database_url, Path(tmp) / "artifacts", args.runs, members=args.users // 2)
        seed_s = time.perf_counter() - t0
        env = {**os.environ, "DJANGO_DEBUG": "0", "BENCH_LOG_LEVEL": "WARNING",
               # plain HTTP on loopback: no redirect to HTTPS, cookies over HTTP (production sits behind TLS)
               "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_BEHIND_TLS_PROXY": "0", "DJANGO_SECURE_COOKIES": "0"}
        figures = {**_load(args, urls, sessions, env, Path(tmp) / "gunicorn.log"), "seed_s": round(seed_s, 1)}
    print(json.dumps(figures, indent=None if args.json else 1))
    return 0 if figures["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
