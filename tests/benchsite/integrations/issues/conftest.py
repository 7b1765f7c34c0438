"""Confirmed change points of a watched benchmark, and the fake GitHub and GitLab of the
pull-request reports (their fixtures, shared)."""
import pytest
from django.utils import timezone

from benchsite.bench.models import Run
from benchsite.integrations.models import RepoWatch
from benchsite.regressions.models import ChangePoint, Verdict

from ..conftest import SHA_A, SHA_B, make_benchmark
from ..pulls.conftest import app_key, forget_tokens, github, gitlab  # noqa: F401  (fixtures)

BATCH = "00000000-0000-0000-0000-000000000001"


@pytest.fixture
def queued(monkeypatch):
    """The issue syncs queued (by id) instead of sent to a broker."""
    from benchsite.celery import app

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **kw: sent.append(args[0]))
    return sent


def watch_of(repo_url: str, slug: str = "tiny-a", *, issues: bool = True) -> RepoWatch:
    benchmark = make_benchmark(slug, repo_url + ".git")
    watch = RepoWatch.objects.create(repo_url=repo_url, branches=["main"], secret_env="X", issues=issues)
    watch.benchmarks.set([benchmark])
    return watch


def run_at(benchmark, commit: str, *, minutes: int = 0) -> Run:
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(name="eager"), batch=BATCH,
                             state=Run.State.SUCCEEDED, commit=commit, ref="main", worker_host="host-a")
    Run.objects.filter(id=run.id).update(created_at=timezone.now() + timezone.timedelta(minutes=minutes))
    run.refresh_from_db()
    return run


def change_point(benchmark, *, good=SHA_A, bad=SHA_B, before=100.0, after=90.0, minutes=0, confirmed=False,
                 **fields) -> ChangePoint:
    """A change of decode tok/s at BAD (from GOOD), with its run's verdict (the interval)."""
    run = run_at(benchmark, bad, minutes=minutes)
    change = (after - before) / before
    Verdict.objects.create(run=run, metric="decode_tok_s", kind="regression" if after < before else "improvement",
                           value=after, baseline=before, effect=change, ci_low=change - 0.02, ci_high=change + 0.02,
                           threshold=0.03)
    return ChangePoint.objects.create(**{
        "benchmark": benchmark, "variant": run.variant, "series_key": "tiny-a/eager/cpu/host-a", "metric": "decode_tok_s",
        "run": run, "index": 10, "commit": bad, "previous_commit": good, "before": before, "after": after,
        "change": change, "is_regression": after < before,
        "status": ChangePoint.Status.CONFIRMED if confirmed else ChangePoint.Status.OPEN, **fields})
