"""Reads for pages and JSON: verdicts of a run, marks for the charts, change points of a benchmark."""
from .models import Bisection, ChangePoint, Verdict


def run_verdicts(*, run) -> list[Verdict]:
    return list(Verdict.objects.filter(run=run).order_by("metric"))


def chart_marks(*, benchmark, metric: str) -> dict:
    """Marks for a benchmark's chart of `metric`: each judged run's verdict (improvements and
    regressions only; 'no change' would clutter it) and the change points."""
    verdicts = (Verdict.objects.filter(run__benchmark=benchmark, metric=metric,
                                       kind__in=[Verdict.Kind.IMPROVEMENT, Verdict.Kind.REGRESSION])
                .order_by("run__created_at", "run_id"))
    changes = ChangePoint.objects.filter(benchmark=benchmark, metric=metric).order_by("run__created_at", "run_id")
    return {
        "verdicts": [{"run": v.run_id, "kind": v.kind, "effect": v.effect, "ci_low": v.ci_low, "ci_high": v.ci_high,
                      "threshold": v.threshold} for v in verdicts],
        "change_points": [{"id": c.id, "run": c.run_id, "variant": c.variant_id, "commit": c.commit,
                           "change": c.change, "status": c.status} for c in changes],
    }


def benchmark_change_points(*, benchmark, limit: int = 50) -> list[ChangePoint]:
    return list(ChangePoint.objects.filter(benchmark=benchmark).select_related("variant", "run", "confirm_run")
                .order_by("-run__created_at", "-id")[:limit])


def benchmark_bisections(*, benchmark, limit: int = 10) -> list[Bisection]:
    return list(Bisection.objects.filter(benchmark=benchmark).select_related("variant")
                .prefetch_related("steps__run").order_by("-created_at", "-id")[:limit])
