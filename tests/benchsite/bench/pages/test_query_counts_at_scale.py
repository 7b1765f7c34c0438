"""Every page reads the same number of queries at 100 runs and at 10,000, warm and cold (the
caches emptied): what it reads does not grow with the history (benchmarks/dashboard_load.py
measures the same pages' latency at 1,000,000 runs)."""
import hashlib
import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchsite.bench.lifecycle import results
from benchsite.bench.models import Annotation, Benchmark, Measurement, Run, Variant
from benchsite.integrations.models import RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullRequest, PullRun
from benchsite.regressions.models import Verdict

# PostgreSQL, the production database, where the admin's estimated counts apply (SQLite: the
# smaller growth of test_dashboard.test_query_counts_do_not_grow_with_runs)
pytestmark = [pytest.mark.django_db, pytest.mark.postgres_pass]
VARIANTS = ("eager", "CUDA graphs", "NCCL LL", "NCCL LL128", "fused")


def _history(benchmark, variants, runs: int, start_batch: int) -> None:
    """RUNS succeeded runs in batches of the 5 variants, two metrics and a verdict each, in bulk."""
    start = timezone.now() - timedelta(days=400)
    rows = []
    for n in range(runs):
        b = start_batch + n // len(variants)
        t = start + timedelta(minutes=36 * b)
        rows.append(Run(benchmark=benchmark, variant=variants[n % len(variants)], batch=uuid.UUID(int=b + 1),
                        state="SUCCEEDED", commit=hashlib.sha1(str(b).encode()).hexdigest(), created_at=t, started_at=t, finished_at=t, worker_host="gpu-1"))
    made = Run.objects.bulk_create(rows, batch_size=2000)
    ids = [r.pk for r in made] if made[0].pk else list(
        Run.objects.filter(benchmark=benchmark).order_by("-id").values_list("id", flat=True)[:runs])
    Measurement.objects.bulk_create([Measurement(run_id=i, metric=m, value=v) for i in ids
                                     for m, v in (("decode_tok_s", 40.0), ("ttft_ms", 70.0))], batch_size=5000)
    Verdict.objects.bulk_create([Verdict(run_id=i, metric="decode_tok_s", kind="pass", threshold=0.03) for i in ids],
                                batch_size=5000)
    call_command("bench_rollup", stdout=io.StringIO())  # a bulk import sends no signals: its charts brought up to date


@pytest.fixture
def site():
    benchmark = Benchmark.objects.create(name="Llama 8B", slug="load", model="m", tensor_parallel_size=2, gpu_pool="h200x2")
    variants = [Variant.objects.create(benchmark=benchmark, position=i + 1, name=n, is_reference=i == 0)
                for i, n in enumerate(VARIANTS)]
    other = Benchmark.objects.create(name="second", slug="second", model="m")
    Variant.objects.create(benchmark=other, position=1, name="only")
    _history(benchmark, variants, 100, 0)
    last = Run.objects.filter(benchmark=benchmark).order_by("-id").first()
    results.artifact_create(run=last, kind="server_log", name="server.log", content="INFO ready\n")
    Annotation.objects.create(benchmark=benchmark, text="enabled CUDA graphs", commit=last.commit[:10])
    watch = RepoWatch.objects.create(repo_url="https://github.com/acme/vllm", branches=["main"], secret_env="X")
    watch.benchmarks.set([benchmark])
    pull = PullRequest.objects.create(watch=watch, provider="github", repo_key="github.com/acme/vllm", number=12,
                                      title="Fuse RMSNorm", base_branch="main", head_sha="e" * 40)
    comparison = Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha="e" * 40, base_branch="main",
                                           state="done", outcome="passed")
    PullRun.objects.create(run=last, comparison=comparison, role="head")
    first = Run.objects.filter(variant=last.variant).order_by("id").first()
    slug = benchmark.slug
    urls = ["/", f"/b/{slug}/", f"/api/benchmarks/{slug}/chart/?metric=decode_tok_s", f"/b/{slug}/waterfall/",
            f"/runs/{last.pk}/", f"/api/runs/{last.pk}/", f"/compare/?a={first.pk}&b={last.pk}",
            f"/api/runs/?benchmark={slug}", f"/api/runs/?commit={last.commit[:12]}", f"/api/commits/{last.commit[:12]}/",
            "/pr/github.com/acme/vllm/12/", f"/b/{slug}/changes/",
            f"/api/benchmarks/{slug}/marks/", "/admin/bench/run/", "/admin/bench/measurement/",
            "/admin/bench/measurement/?metric=decode_tok_s", "/admin/regressions/verdict/"]
    return benchmark, variants, urls


def _counts(urls) -> dict[str, tuple[int, int]]:
    """(cold, warm) query count of each URL: cold right after the caches are emptied."""
    admin = Client()
    admin.force_login(get_user_model().objects.get_or_create(username="root", is_staff=True, is_superuser=True)[0])
    counts = {}
    for url in urls:
        client = admin if url.startswith("/admin/") else Client()
        cache.clear()
        found = []
        for _ in range(2):
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url).status_code == 200, url
            found.append(len(ctx))
        counts[url] = tuple(found)
    return counts


def test_every_page_reads_as_many_queries_at_10000_runs_as_at_100(site):
    benchmark, variants, urls = site
    at_100 = _counts(urls)
    _history(benchmark, variants, 9_900, 20)
    assert Run.objects.count() == 10_000 and Measurement.objects.count() == 20_000
    assert _counts(urls) == at_100
    assert all(warm <= 16 for _, warm in at_100.values()), {u: c for u, c in at_100.items() if c[1] > 16}
