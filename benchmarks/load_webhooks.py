"""A burst of signed GitHub push deliveries against the app under gunicorn on PostgreSQL.

    python benchmarks/load_webhooks.py [--deliveries 1000] [--concurrency 32] [--workers 3] [--json]

It creates a database of its own on the PostgreSQL server (`--postgres`, default the local
test server), migrates it, watches one repository with two benchmarks, starts gunicorn on a
free port and a private redis-server as broker (nothing consumes: runs stay QUEUED), then
sends the burst: pushes of `--branches` branches, each push a new commit, every fifth a new
head pushed to one of `--pulls` pull requests (a `pull_request` `synchronize`: both sides of a
comparison queued, the PR's earlier head superseded), and every tenth delivery a repeat of an
earlier delivery id. It checks that every delivery was answered and stored, that repeats were
deduplicated, that runs were coalesced per branch (only the latest push of each branch keeps
QUEUED runs) and per pull request (only one head keeps them), and prints deliveries per second
and latency.
"""
import argparse
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECRET = "load-secret"
REPO = "https://github.com/acme/engine"


def _setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Benchmark, EngineSource
    from benchsite.integrations.models import RepoWatch

    source = EngineSource.objects.create(name="engine", kind="git", repo_url=REPO + ".git")
    watch = RepoWatch.objects.create(repo_url=REPO, branches=["*"], secret_env="BENCH_LOAD_WEBHOOK_SECRET")
    for slug in ("load-a", "load-b"):
        benchmark = Benchmark.objects.create(name=slug, slug=slug, model="/m", engine_source=source)
        trigger.variant_create(benchmark=benchmark, name="eager", is_reference=True)
        trigger.variant_create(benchmark=benchmark, name="compiled")
        watch.benchmarks.add(benchmark)


def _pull_body(number: int, sha: str) -> bytes:
    repo = {"full_name": "acme/engine", "html_url": REPO, "clone_url": REPO + ".git"}
    return json.dumps({"action": "synchronize", "number": number, "repository": repo, "sender": {"login": "load"},
                       "pull_request": {"number": number, "title": "load", "draft": False, "labels": [],
                                        "user": {"login": "load"}, "html_url": f"{REPO}/pull/{number}",
                                        "head": {"sha": sha, "ref": f"pr/{number}", "repo": repo},
                                        "base": {"ref": "main", "sha": "f" * 40, "repo": repo}}}).encode()


def _deliveries(n: int, branches: int, pulls: int) -> list[tuple[str, bytes, str]]:
    out, sent = [], []
    for i in range(n):
        if i % 10 == 9 and sent:  # a redelivery of an earlier delivery: same id, same body
            out.append(sent[(i * 7) % len(sent)])
            continue
        if pulls and i % 5 == 4:
            sent.append((str(uuid.uuid4()), _pull_body(len(sent) % pulls + 1, f"{i:040x}"), "pull_request"))
            out.append(sent[-1])
            continue
        branch = f"perf/b{len(sent) % branches}"
        body = json.dumps({"ref": f"refs/heads/{branch}", "before": "0" * 40, "after": f"{i:040x}", "deleted": False,
                           "repository": {"full_name": "acme/engine", "html_url": REPO, "clone_url": REPO + ".git"},
                           "head_commit": {"id": f"{i:040x}", "message": "load"}}).encode()
        sent.append((str(uuid.uuid4()), body, "push"))
        out.append(sent[-1])
    return out


def _post(client: httpx.Client, url: str, delivery: tuple[str, bytes, str]) -> tuple[int, float]:
    delivery_id, body, event = delivery
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    t0 = time.perf_counter()
    r = client.post(url, content=body, headers={"Content-Type": "application/json", "X-GitHub-Event": event,
                                                 "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": signature})
    return r.status_code, time.perf_counter() - t0


def _checks(deliveries, statuses) -> dict:
    from benchsite.bench.models import Run
    from benchsite.integrations.models import WebhookDelivery

    unique = {d[0] for d in deliveries}
    branches = {json.loads(body)["ref"] for _, body, event in deliveries if event == "push"}
    pulls = {json.loads(body)["number"] for _, body, event in deliveries if event == "pull_request"}
    queued = Run.objects.filter(state=Run.State.QUEUED)
    per_branch = {ref: set(queued.filter(ref=ref.removeprefix("refs/heads/")).values_list("commit", flat=True))
                  for ref in branches}
    return {
        "answered": sum(1 for s in statuses if s in (200, 202)),
        "stored": WebhookDelivery.objects.count(),
        "accepted": WebhookDelivery.objects.filter(accepted=True).count(),
        "unique_ids": len(unique),
        "runs_created": Run.objects.count(),
        "runs_queued": Run.objects.filter(state=Run.State.QUEUED).count(),
        # coalesced: each branch keeps the runs of exactly one push (the last one handled)
        "branches_with_one_queued_push": sum(len(commits) == 1 for commits in per_branch.values()),
        "branches": len(branches),
        # superseded: each pull request keeps the queued runs of exactly one head
        "pulls_with_one_queued_head": sum(
            len(set(queued.filter(pull_run__comparison__pull__number=n).values_list("ref", flat=True))) == 1
            for n in pulls),
        "pulls": len(pulls),
    }


def _burst(args, tmp: Path, redis, database_url: str) -> dict:
    from tests.faults.harness import free_port

    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "CELERY_BROKER_URL": redis.url,
           "CELERY_RESULT_BACKEND": redis.url, "BENCH_LOAD_WEBHOOK_SECRET": SECRET, "BENCH_LOG_LEVEL": "WARNING"}
    gunicorn = None
    try:
        _setup(database_url)
        gunicorn = subprocess.Popen([sys.executable, "-m", "gunicorn", "benchsite.wsgi", "--bind", f"127.0.0.1:{port}",
                                     "--workers", str(args.workers), "--log-level", "warning"], cwd=ROOT, env=env,
                                    stdout=open(tmp / "gunicorn.log", "wb"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/webhooks/github/"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        deliveries = _deliveries(args.deliveries, args.branches, args.pulls)
        with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=args.concurrency)) as client:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.concurrency) as pool:
                results = list(pool.map(lambda d: _post(client, url, d), deliveries))
            elapsed = time.perf_counter() - t0
        statuses, latencies = [s for s, _ in results], sorted(t for _, t in results)
        figures = {
            "deliveries": len(deliveries), "concurrency": args.concurrency, "gunicorn_workers": args.workers,
            "seconds": round(elapsed, 2), "deliveries_per_s": round(len(deliveries) / elapsed, 1),
            "latency_ms_p50": round(statistics.median(latencies) * 1e3, 1),
            "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))] * 1e3, 1),
            "statuses": {str(s): statuses.count(s) for s in sorted(set(statuses))},
            **_checks(deliveries, statuses),
        }
    finally:
        if gunicorn is not None:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--branches", type=int, default=10)
    parser.add_argument("--pulls", type=int, default=5, help="pull requests whose new heads are in the burst")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from benchmarks.pgdb import private_database
    from tests.faults.harness import PrivateRedis

    tmp = Path(tempfile.mkdtemp(prefix="load-"))
    redis = PrivateRedis(tmp)
    redis.start()
    try:
        with private_database(args.postgres, "bench_load") as database_url:
            figures = _burst(args, tmp, redis, database_url)
    finally:
        redis.kill()
    print(json.dumps(figures, indent=None if args.json else 1))
    ok = (figures["answered"] == figures["deliveries"] == figures["stored"]
          and figures["accepted"] == figures["unique_ids"]
          and figures["branches_with_one_queued_push"] == figures["branches"]
          and figures["pulls_with_one_queued_head"] == figures["pulls"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
