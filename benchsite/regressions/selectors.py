"""Reads for pages and JSON: verdicts of a run, marks for the charts, change points of a benchmark."""
from benchsite.bench.models import Run

from .models import Bisection, ChangePoint, Verdict


def awaiting_confirmation(change_points):
    """Those of CHANGE_POINTS whose confirmation run is still to finish or to be judged (held,
    queued, running); a cancelled one confirms nothing and is not waited for."""
    return (change_points.filter(confirmation=ChangePoint.Confirmation.PENDING, confirm_run__isnull=False)
            .exclude(confirm_run__state=Run.State.CANCELLED))


def confirmation_due(*, run) -> bool:
    """Is a confirmation of what RUN found still to come? True while a regression found at RUN
    waits for its confirmation re-run (one per variant and commit, shared by every metric)."""
    return awaiting_confirmation(ChangePoint.objects.filter(run=run)).exists()


def confirmations_due(*, run_ids) -> set[int]:
    """confirmation_due for many runs in one query: the ids of those still waiting."""
    return set(awaiting_confirmation(ChangePoint.objects.filter(run_id__in=list(run_ids)))
               .values_list("run_id", flat=True))


def second_look_possible(*, run) -> bool:
    """Could a change found at RUN still get its second re-run, although its first disagreed? While
    its series has fewer than judging.SECOND_LOOK_AFTER runs from it on (the detector looks again
    after each: changepoints.changepoint_upsert)."""
    from .detect.judging import SECOND_LOOK_AFTER
    from .series import series_points

    disagreed = ChangePoint.objects.filter(run=run, status=ChangePoint.Status.OPEN, confirm_attempts=1,
                                           confirmation=ChangePoint.Confirmation.DISAGREED).select_related("run")
    return any(len(series_points(run=cp.run, metric=cp.metric, since_run=cp.run, newest=SECOND_LOOK_AFTER))
               < SECOND_LOOK_AFTER for cp in disagreed)


def run_verdicts(*, run) -> list[Verdict]:
    return list(Verdict.objects.filter(run=run).order_by("metric"))


def chart_marks(*, benchmark, metric: str, point: str = "") -> dict:
    """Marks for a benchmark's chart of `metric` at workload POINT ("" the runs' first): each
    judged run's verdict (improvements and regressions only; 'no change' would clutter it) and
    the change points."""
    verdicts = (Verdict.objects.filter(run__benchmark=benchmark, metric=metric, point=point,
                                       kind__in=[Verdict.Kind.IMPROVEMENT, Verdict.Kind.REGRESSION])
                .order_by("run__created_at", "run_id"))
    changes = (ChangePoint.objects.filter(benchmark=benchmark, metric=metric, point=point)
               .order_by("run__created_at", "run_id"))
    return {
        "verdicts": [{"run": v.run_id, "kind": v.kind, "effect": v.effect, "ci_low": v.ci_low, "ci_high": v.ci_high,
                      "threshold": v.threshold} for v in verdicts],
        "change_points": [{"id": c.id, "run": c.run_id, "variant": c.variant_id, "commit": c.commit,
                           "change": c.change, "status": c.status} for c in changes],
    }


def benchmark_change_points(*, benchmark, limit: int = 50) -> list[ChangePoint]:
    return list(ChangePoint.objects.filter(benchmark=benchmark).select_related("variant", "run", "previous_run", "confirm_run")
                .order_by("-run__created_at", "-id")[:limit])


def benchmark_bisections(*, benchmark, limit: int = 10) -> list[Bisection]:
    return list(Bisection.objects.filter(benchmark=benchmark).select_related("variant")
                .prefetch_related("steps__run").order_by("-created_at", "-id")[:limit])
