"""Runs and measurements written straight to the database (no engine): a benchmark with one
variant, and a helper that adds a finished run with its decode figure and correctness."""
import uuid

import pytest
from django.utils import timezone

from benchsite.bench import services
from benchsite.bench.models import Benchmark, EngineSource, Measurement, Run
from runners import contract

REPO = "https://github.com/example/engine.git"


def sha(n: int) -> str:
    return f"{n:040x}"


@pytest.fixture
def benchmark(db):
    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=REPO, default_ref="main")
    bench = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", engine_source=source)
    services.variant_create(benchmark=bench, name="eager", flags=["--enforce-eager"], is_reference=True)
    return bench


def add_run(benchmark, value, *, host="host-a", correct=True, samples=None, flags=None, commit="",
            metric=contract.DECODE_TOK_S, state=Run.State.SUCCEEDED, variant=None, fingerprint="") -> Run:
    """A finished run whose figure for `metric` is `value` (samples: three repeats at `value`
    unless given). `fingerprint`: the machine's (runners.hostinfo.fingerprint); '' as from an
    older worker, whose runs are compared by host name."""
    variant = variant or benchmark.variants.get()
    now = timezone.now()
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state, commit=commit,
                             ref="main", worker_host=host, host_fingerprint=fingerprint, started_at=now,
                             finished_at=now)
    if state != Run.State.SUCCEEDED:
        return run
    info = contract.METRICS[metric]
    samples = [value] * 3 if samples is None else samples
    Measurement.objects.create(run=run, metric=metric, value=value, unit=info.unit, direction=info.direction,
                               samples=samples, sample_flags=flags if flags is not None else [""] * len(samples))
    if correct is not None:
        Measurement.objects.create(run=run, metric=contract.CORRECT, value=1.0 if correct else 0.0,
                                   direction="higher")
    return run
