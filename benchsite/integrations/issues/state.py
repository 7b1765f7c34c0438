"""What a change point's issue should say and whether it should be open, read from the change
point, its verdict, its range's bisection and the later changes of its series."""
from __future__ import annotations

from dataclasses import dataclass

from benchsite.regressions.models import Bisection, ChangePoint, Verdict
from benchsite.regressions.thresholds import bound_for
from runners import contract


@dataclass(frozen=True)
class IssueFacts:
    change_point: ChangePoint
    verdict: Verdict | None       # the change's run judged on its metric: the interval
    bisection: Bisection | None   # the newest bisection of the change's commit range
    restored_by: ChangePoint | None  # a later change of the series that brought the level back


def restores(metric: str, before: float, level: float, bound: float) -> bool:
    """LEVEL is back at BEFORE: not worse than it by BOUND (relative) or more, in the metric's
    better direction."""
    if contract.METRICS[metric].direction == "higher":
        return level >= before * (1 - bound)
    return level <= before * (1 + bound)


def restoring_change(cp: ChangePoint) -> ChangePoint | None:
    """The first later improvement of CP's series (not marked a false alarm) whose level is back
    within the series' bound of the level before CP."""
    info = contract.METRICS.get(cp.metric)
    if cp.metric == contract.CORRECT or info is None or info.direction == "none":
        return None
    later = (ChangePoint.objects.filter(series_key=cp.series_key, metric=cp.metric, point=cp.point, is_regression=False,
                                        run__created_at__gt=cp.run.created_at)
             .exclude(status=ChangePoint.Status.FALSE_ALARM).select_related("run").order_by("run__created_at", "id"))
    candidates = list(later)
    if not candidates:
        return None
    bound = bound_for(run=cp.run, metric=cp.metric, point=cp.point).relative
    return next((c for c in candidates if restores(cp.metric, cp.before, c.after, bound)), None)


def range_bisection(cp: ChangePoint) -> Bisection | None:
    """The bisection of CP's commit range: one per range, on whichever change of it moved most."""
    if not cp.commit:
        return None
    return (Bisection.objects.filter(benchmark_id=cp.benchmark_id, bad_commit=cp.commit)
            .order_by("-created_at", "-id").first())


def issue_facts(cp: ChangePoint) -> IssueFacts:
    verdict = Verdict.objects.filter(run_id=cp.run_id, metric=cp.metric, point=cp.point).first()
    return IssueFacts(cp, verdict, range_bisection(cp), restoring_change(cp))
