"""Change points of a run's series, stored once each: a detection after a later run that lands
within `min_size` runs of a known change point updates it instead of adding another."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from benchsite.bench.models import Measurement, Run
from runners import contract

from .detect import edivisive, judging
from .models import ChangePoint
from .outcomes import outcomes_refresh
from .signals import change_point_changed
from .series import Point, parent_commit, series_key, series_point, series_points
from .thresholds import bound_for, judged_metrics
from .verdicts import baseline_reset

MIN_SIZE = edivisive.DEFAULT_MIN_SIZE
MAX_PVALUE = edivisive.DEFAULT_MAX_PVALUE
MAX_POINTS = 500  # the newest runs of a long series: E-Divisive is O(n^2) in time and memory


class MarkError(ValueError):
    """A change point cannot be marked as asked."""


def _is_regression(metric: str, before: float, after: float) -> bool:
    return after < before if contract.METRICS[metric].direction == "higher" else after > before


def _nearby(existing: list[ChangePoint], points: list[Point], index: int) -> ChangePoint | None:
    window = {p.run.id for p in points[max(0, index - MIN_SIZE): index + MIN_SIZE + 1]}
    return next((cp for cp in existing if cp.run_id in window), None)


def changepoint_upsert(*, run: Run, metric: str, points: list[Point], found, point: str = "") -> tuple[ChangePoint, bool]:
    """Store one detected change point (`found`: edivisive.ChangePoint); (row, needs a
    confirmation): new, moved to another commit after its re-run disagreed, or still found at
    its commit SECOND_LOOK_AFTER runs on after its first re-run disagreed."""
    key = series_key(run, point)
    after_run, before_run = points[found.index].run, points[found.index - 1].run
    fields = {"index": found.index, "before": found.before, "after": found.after, "change": found.change,
              "pvalue": found.pvalue, "is_regression": _is_regression(metric, found.before, found.after)}
    existing = list(ChangePoint.objects.filter(series_key=key, metric=metric))
    match = _nearby(existing, points, found.index)
    if match is not None:
        moved = match.run_id != after_run.id
        disagreed = match.status == ChangePoint.Status.OPEN and match.confirmation == ChangePoint.Confirmation.DISAGREED
        reopen = disagreed and moved
        # One unlucky re-run must not hide a real change for good: still found at the same commit
        # with SECOND_LOOK_AFTER runs from it on, it gets one more confirmation run.
        second_look = (disagreed and not moved and match.confirm_attempts == 1
                       and len(points) - found.index >= judging.SECOND_LOOK_AFTER)
        if match.status == ChangePoint.Status.OPEN and (not match.confirmation or reopen):
            # Found early, a change sits a point or two off (the last segment needs MIN_SIZE
            # points); when its re-run at the wrong commit disagreed, the right commit gets its own.
            fields.update(run=after_run, previous_run=before_run, commit=after_run.commit,
                          previous_commit=parent_commit(after_run, before_run))
            if reopen:
                fields.update(confirmation=ChangePoint.Confirmation.NONE, confirm_run=None, confirm_attempts=0,
                              confirm_figures=[])
        if second_look:
            fields.update(confirmation=ChangePoint.Confirmation.NONE, confirm_run=None, confirm_figures=[])
        ChangePoint.objects.filter(pk=match.pk).update(**fields, updated_at=timezone.now())
        match.refresh_from_db()
        return match, reopen or second_look
    created = ChangePoint.objects.create(benchmark=run.benchmark, variant=run.variant, series_key=key, metric=metric,
                                         point=point, run=after_run, previous_run=before_run, commit=after_run.commit,
                                         previous_commit=parent_commit(after_run, before_run), **fields)
    return created, True


def _judged_series(run: Run) -> list[tuple[str, str]]:
    """(metric, point) of each judged series RUN has a figure in; point "" for its first point."""
    rows = Measurement.all_points.filter(run=run, metric__in=judged_metrics())
    return sorted({(m.metric, series_point(m)) for m in rows.only("metric", "point", "first_point")})


def changepoints_detect(*, run: Run) -> list[ChangePoint]:
    """Detect change points in every judged series of `run` (since the last expected change);
    returns those this call created or re-opened (each needs a confirmation)."""
    created = []
    for metric, point in _judged_series(run):
        reset = baseline_reset(run=run, metric=metric, point=point)
        points = series_points(run=run, metric=metric, since_run=reset.run if reset else None, until_run=run,
                               point=point, newest=MAX_POINTS)
        found = edivisive.detect([p.value for p in points], min_size=MIN_SIZE, max_pvalue=MAX_PVALUE,
                                 min_change=bound_for(run=run, metric=metric, point=point).relative)
        with transaction.atomic():
            for cp in found:
                if reset is not None and cp.index == 0:
                    continue
                row, is_new = changepoint_upsert(run=run, metric=metric, points=points, found=cp, point=point)
                if is_new:
                    created.append(row)
    return created


def changepoint_mark(*, change_point: ChangePoint, status: str, user=None) -> ChangePoint:
    """A user's judgement: 'expected' (an intended trade-off: the baseline restarts there) or
    'false_alarm'. Both are kept and count in the accuracy figures."""
    allowed = (ChangePoint.Status.EXPECTED, ChangePoint.Status.FALSE_ALARM, ChangePoint.Status.OPEN)
    if status not in allowed:
        raise MarkError(f"status must be one of {', '.join(allowed)}, not {status!r}")
    change_point.status = status
    change_point.marked_by = user.get_username() if user is not None and user.is_authenticated else ""
    change_point.marked_at = timezone.now()
    change_point.save(update_fields=["status", "marked_by", "marked_at", "updated_at"])
    outcomes_refresh(run_ids=[change_point.run_id])  # a false alarm no longer counts against its run
    change_point_changed.send(sender=ChangePoint, change_point=change_point)
    return change_point
