"""Reads of a run's series: the same benchmark, variant, GPU pool, host fingerprint and settings,
for one metric, in first-parent order; only successful runs on the benchmark's main line
(bench.domain.branches) with a correct output and a clean figure.

Settings are what in a run's kept spec can move a figure (KeptSpec.settings, contract.settings_digest):
a benchmark re-applied with another model, max_tokens or engine argument starts a new series
rather than a step that change detection would blame on the next commit; going back to earlier
settings continues their series. Runs triggered before specs were kept have no known settings and
count in every series of their benchmark and variant, as they did before. Likewise a series holds
one measuring method (a measurement's `method`, runners.contract.method_of: a point's streams
primed, say): the figures of another method are left out of it."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db.models import Exists, F, OuterRef, Q

from benchsite.bench.domain.branches import main_line_q
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


def series_key(run: Run, point: str = "") -> str:
    """The series of RUN's POINT ("" its first point: the key every run had before workload points,
    so the change points found before them keep matching; another point's key ends in its id)."""
    fp = run.host_fingerprint and _short(run.host_fingerprint)  # a fingerprint is long: its hash keeps keys short
    key = f"{run.benchmark.slug}/{run.variant.name}/{run.benchmark.gpu_pool}/{fp or run.worker_host or '?'}"
    return f"{key}/{point}" if point else key


def point_measurements(point: str = ""):
    """The measurements of POINT's series: "" the runs' first points (one figure a run), else that id's."""
    return Measurement.all_points.filter(point=point) if point else Measurement.objects.all()


def series_point(measurement: Measurement) -> str:
    """The point a measurement's series is keyed by: "" for its run's first point."""
    return "" if measurement.first_point else measurement.point


def parent_commit(run: Run, previous: Run | None) -> str:
    """The commit before RUN's in git: its first parent as the worker reported it (a push of
    several commits measures only its head, so the previous point may be further back), else
    the previous run's commit."""
    if run.build is not None and run.build.parent_commit:
        return run.build.parent_commit
    return previous.commit if previous is not None else ""


def same_machine(run: Run) -> Q:
    """Runs comparable with `run`: the same fingerprint; without one (an older worker), the same host."""
    if run.host_fingerprint:
        return Q(host_fingerprint=run.host_fingerprint)
    return Q(host_fingerprint="", worker_host=run.worker_host)


def same_settings(run: Run) -> Q:
    """Runs measured with RUN's settings, and those whose settings are not known (see the module doc)."""
    if run.kept_spec_id is None:
        return Q()
    return Q(kept_spec__isnull=True) | Q(kept_spec__settings=run.kept_spec.settings)


def other_settings_before(run: Run) -> Run | None:
    """The newest run before RUN that would be in its series but ran with other settings."""
    if run.kept_spec_id is None:
        return None
    return (_comparable_runs(run).filter(kept_spec__isnull=False).exclude(kept_spec__settings=run.kept_spec.settings)
            .filter(created_at__lte=run.created_at).exclude(id=run.id).order_by("-created_at", "-id").first())


def is_incorrect(run: Run) -> bool:
    return Measurement.objects.filter(run=run, metric=contract.CORRECT, value=0).exists()


def _comparable_runs(run: Run):
    """RUN's series but for its settings: the same machine, main line, benchmark and variant."""
    incorrect = Measurement.objects.filter(run=OuterRef("pk"), metric=contract.CORRECT, value=0)
    return (Run.objects.filter(same_machine(run), main_line_q(run.benchmark), benchmark_id=run.benchmark_id,
                               variant_id=run.variant_id, state=Run.State.SUCCEEDED)
            .exclude(Exists(incorrect))
            .exclude(bisect_steps__isnull=False)  # old commits run late: not part of the timeline
            .exclude(canary_run__isnull=False))  # the fixed commit: a series of its own


def _same_series_runs(run: Run):
    # in first-parent order (the worker reports each commit's depth); runs recorded without it are
    # older and come first, in the order they ran
    return (_comparable_runs(run).filter(same_settings(run))
            .order_by(F("build__first_parent_depth").asc(nulls_first=True), "created_at", "id"))


def series_points(*, run: Run, metric: str, since_run: Run | None = None, until_run: Run | None = None,
                  point: str = "", newest: int | None = None) -> list[Point]:
    """The series `run` belongs to, oldest first, from `since_run` (a baseline reset) up to and
    including `until_run`, of workload POINT ("" the first). The pool is the benchmark's, so the
    same benchmark is the same pool. NEWEST: only the newest that many runs of it (a year of
    history is 10,000 runs a series: a verdict reads its last 20, not all of them)."""
    runs = _same_series_runs(run)
    if since_run is not None:
        runs = runs.filter(created_at__gte=since_run.created_at).exclude(created_at=since_run.created_at, id__lt=since_run.id)
    if until_run is not None:
        runs = runs.filter(created_at__lte=until_run.created_at).exclude(created_at=until_run.created_at, id__gt=until_run.id)
    runs = runs.select_related("benchmark", "variant", "build")
    if newest is not None:
        runs = list(runs.reverse()[:newest])[::-1]
    else:
        runs = list(runs)
    measurements = {m.run_id: m for m in point_measurements(point).filter(run_id__in=[r.id for r in runs], metric=metric)}
    own = measurements.get(run.id) or point_measurements(point).filter(run_id=run.id, metric=metric).first()
    points = []
    for r in runs:
        m = measurements.get(r.id)
        figure = run_figure(m) if m is not None else None
        if figure is not None and (own is None or contract.method_of(m.details) == contract.method_of(own.details)):
            points.append(Point(run=r, value=figure))
    return points
