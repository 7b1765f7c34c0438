"""Canaries: a fixed commit and variant re-run on a schedule, kept out of the normal series. A
change point in a canary's series is the host or environment moving; verdicts say so. A canary
run takes the benchmark's settings as they are when it is triggered, and its series, like every
series, holds one set of them (series.same_settings): a re-applied benchmark is not a host shift."""
from __future__ import annotations

import logging
from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from benchsite.bench.models import Measurement, Run
from benchsite.bench.lifecycle.trigger import runs_trigger, TriggerError
from runners import contract

from .detect import edivisive
from .models import Canary, CanaryRun, ChangePoint
from .samples import run_figure
from .series import same_machine, same_settings, series_key
from .thresholds import judged_metrics, threshold_for

log = logging.getLogger(__name__)
PREFIX = "canary:"


def canary_series_key(run: Run) -> str:
    return PREFIX + series_key(run)


def canaries_trigger_due(*, now=None) -> list[Run]:
    """Queue a run of every active canary whose interval has passed."""
    now = now or timezone.now()
    queued = []
    for canary in Canary.objects.filter(active=True).select_related("benchmark__engine_source", "variant"):
        if canary.last_triggered_at and now - canary.last_triggered_at < timedelta(hours=canary.every_hours):
            continue
        try:
            (run,) = runs_trigger(benchmark=canary.benchmark, trigger=Run.Trigger.SCHEDULE, variants=[canary.variant],
                                  commit=canary.commit, ref=canary.commit, priority=Run.Priority.BACKGROUND)
        except TriggerError as exc:
            log.error("%s not run: %s", canary, exc)
            continue
        CanaryRun.objects.create(canary=canary, run=run)
        canary.last_triggered_at = now
        canary.save(update_fields=["last_triggered_at"])
        queued.append(run)
    return queued


def _canary_points(canary: Canary, run: Run, metric: str) -> list[tuple[Run, float]]:
    incorrect = Measurement.objects.filter(run=OuterRef("pk"), metric=contract.CORRECT, value=0)
    runs = (Run.objects.filter(same_machine(run), same_settings(run), canary_run__canary=canary,
                               state=Run.State.SUCCEEDED)
            .exclude(Exists(incorrect)).order_by("created_at", "id"))
    by_run = {m.run_id: m for m in Measurement.objects.filter(run__in=runs, metric=metric)}
    points = [(r, run_figure(by_run[r.id])) for r in runs if r.id in by_run]
    return [(r, v) for r, v in points if v is not None]


def canary_record(*, run: Run) -> list[ChangePoint]:
    """Detect change points in the canary's series after one of its runs finished."""
    canary = run.canary_run.canary
    created = []
    metrics = set(run.measurements.values_list("metric", flat=True)) & set(judged_metrics())
    for metric in sorted(metrics):
        points = _canary_points(canary, run, metric)
        found = edivisive.detect([v for _, v in points], min_change=threshold_for(benchmark=run.benchmark, metric=metric))
        for cp in found:
            after, before = points[cp.index][0], points[cp.index - 1][0]
            row, is_new = ChangePoint.objects.get_or_create(
                series_key=canary_series_key(run), metric=metric, run=after,
                defaults={"benchmark": run.benchmark, "variant": run.variant, "previous_run": before,
                          "index": cp.index, "commit": after.commit, "previous_commit": before.commit,
                          "before": cp.before, "after": cp.after, "change": cp.change, "pvalue": cp.pvalue})
            if is_new:
                created.append(row)
    return created


def canary_shift(*, run: Run, metric: str, since) -> ChangePoint | None:
    """A canary change point of the same host and pool after `since`, up to `run`."""
    return (ChangePoint.objects.filter(series_key=canary_series_key(run), metric=metric,
                                       run__created_at__gt=since, run__created_at__lte=run.created_at)
            .order_by("run__created_at").first())
