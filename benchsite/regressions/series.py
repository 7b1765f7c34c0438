"""Reads of a run's series: the same benchmark, variant, GPU pool and host fingerprint, for one
metric, in run order; only successful runs with a correct output and a clean figure."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q

from benchsite.bench.models import Measurement, Run
from runners import contract

from .samples import run_figure


@dataclass(frozen=True)
class Point:
    run: Run
    value: float


def host_fingerprint(run: Run) -> str:
    """What is known of the machine: GPU model and count, driver and CPU model as the worker
    reported them; for a run of an older worker that reported none, its host name."""
    return run.host_fingerprint or (f"host {run.worker_host}" if run.worker_host else "")


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def series_key(run: Run) -> str:
    fp = run.host_fingerprint and _short(run.host_fingerprint)  # a fingerprint is long: its hash keeps keys short
    return f"{run.benchmark.slug}/{run.variant.name}/{run.benchmark.gpu_pool}/{fp or run.worker_host or '?'}"


def same_machine(run: Run) -> Q:
    """Runs comparable with `run`: the same fingerprint; without one (an older worker), the same host."""
    if run.host_fingerprint:
        return Q(host_fingerprint=run.host_fingerprint)
    return Q(host_fingerprint="", worker_host=run.worker_host)


def is_incorrect(run: Run) -> bool:
    return Measurement.objects.filter(run=run, metric=contract.CORRECT, value=0).exists()


def _same_series_runs(run: Run):
    incorrect = Measurement.objects.filter(run=OuterRef("pk"), metric=contract.CORRECT, value=0)
    return (Run.objects.filter(same_machine(run), benchmark_id=run.benchmark_id, variant_id=run.variant_id,
                               state=Run.State.SUCCEEDED)
            .exclude(Exists(incorrect))
            .exclude(bisect_steps__isnull=False)  # old commits run late: not part of the timeline
            .exclude(canary_run__isnull=False)  # the fixed commit: a series of its own
            .order_by("created_at", "id"))


def series_points(*, run: Run, metric: str, since_run: Run | None = None, until_run: Run | None = None) -> list[Point]:
    """The series `run` belongs to, oldest first, from `since_run` (a baseline reset) up to and
    including `until_run`. The pool is the benchmark's, so the same benchmark is the same pool."""
    runs = _same_series_runs(run)
    if since_run is not None:
        runs = runs.filter(created_at__gte=since_run.created_at).exclude(created_at=since_run.created_at, id__lt=since_run.id)
    if until_run is not None:
        runs = runs.filter(created_at__lte=until_run.created_at).exclude(created_at=until_run.created_at, id__gt=until_run.id)
    measurements = {m.run_id: m for m in Measurement.objects.filter(run__in=runs, metric=metric)}
    points = []
    for r in runs.select_related("benchmark", "variant", "build"):
        m = measurements.get(r.id)
        figure = run_figure(m) if m is not None else None
        if figure is not None:
            points.append(Point(run=r, value=figure))
    return points
