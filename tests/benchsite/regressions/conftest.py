"""Runs and measurements written straight to the database (no engine): a benchmark with one
variant, a helper that adds a finished run with its decode figure and correctness, and a real
git repository of 16 commits where one commit adds work per token."""
import os
import subprocess
import uuid

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, EngineSource, Measurement, Run
from runners import contract

REPO = "https://github.com/example/engine.git"


def sha(n: int) -> str:
    return f"{n:040x}"


@pytest.fixture
def benchmark(db):
    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=REPO, default_ref="main")
    bench = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", engine_source=source)
    trigger.variant_create(benchmark=bench, name="eager", flags=["--enforce-eager"], is_reference=True)
    return bench


def regression_costs(commit: str) -> dict:
    """What the regression found at COMMIT cost: its change points per variant, the confirmation
    runs per variant, and the bisections of its ranges (for any test that pushes a slow commit)."""
    from benchsite.regressions.models import Bisection, ChangePoint

    changes = ChangePoint.objects.filter(commit=commit).exclude(metric=contract.CORRECT).select_related("variant")
    confirmations: dict[str, set[int]] = {}
    for cp in changes.exclude(confirm_run=None):
        confirmations.setdefault(cp.variant.name, set()).add(cp.confirm_run_id)
    return {"changes": {v: sorted(cp.metric for cp in changes if cp.variant.name == v)
                        for v in {cp.variant.name for cp in changes}},
            "confirmation_runs": {v: len(ids) for v, ids in confirmations.items()},
            "bisections": Bisection.objects.filter(bad_commit=commit).count()}


def add_run(benchmark, value, *, host="host-a", correct=True, samples=None, flags=None, commit="",
            metric=contract.DECODE_TOK_S, state=Run.State.SUCCEEDED, variant=None, fingerprint="",
            kept_spec=None, details=None) -> Run:
    """A finished run whose figure for `metric` is `value` (samples: three repeats at `value`
    unless given). `fingerprint`: the machine's (runners.hostinfo.fingerprint); '' as from an
    older worker, whose runs are compared by host name. `kept_spec`: the spec it was triggered
    with (None: a run from before specs were kept)."""
    variant = variant or benchmark.variants.get()
    now = timezone.now()
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state, commit=commit,
                             ref="main", branch="main", worker_host=host, host_fingerprint=fingerprint, started_at=now,
                             finished_at=now, kept_spec=kept_spec)
    if state != Run.State.SUCCEEDED:
        return run
    info = contract.METRICS[metric]
    samples = [value] * 3 if samples is None else samples
    Measurement.objects.create(run=run, metric=metric, value=value, unit=info.unit, direction=info.direction,
                               samples=samples, sample_flags=flags if flags is not None else [""] * len(samples),
                               details=details or {})
    if correct is not None:
        Measurement.objects.create(run=run, metric=contract.CORRECT, value=1.0 if correct else 0.0,
                                   direction="higher")
    return run


GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
SLOW_FROM = 11  # c11 adds work per token


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch, settings):
    """main: c0..c15; c11 sets EXTRA_WORK = 1. A side branch and an unrelated orphan commit."""
    settings.BENCH_ALLOW_FILE_REPOS = True
    settings.VAR_DIR = tmp_path / "var"
    path = tmp_path / "engine"
    path.mkdir()
    git(path, "init", "--quiet", "--initial-branch=main")
    commits = []
    for i in range(16):
        (path / "work.py").write_text(f"EXTRA_WORK = {1 if i >= SLOW_FROM else 0}\nSTEP = {i}\n")
        git(path, "add", "work.py")
        git(path, "commit", "--quiet", "-m", f"c{i}")
        commits.append(git(path, "rev-parse", "HEAD"))
    git(path, "checkout", "--quiet", "-b", "side", commits[5])
    (path / "side.txt").write_text("side\n")
    git(path, "add", "side.txt")
    git(path, "commit", "--quiet", "-m", "side")
    side = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "--quiet", "--orphan", "other")
    git(path, "commit", "--quiet", "--allow-empty", "-m", "unrelated")
    orphan = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "--quiet", "main")
    return {"path": path, "url": f"file://{path}", "commits": commits, "side": side, "orphan": orphan}
