"""The bound a change must reach before a verdict, a change point, a confirmation or a bisection
step counts it: explicit thresholds first, then the rule from the series' noise
(regressions.detect.sensitivity, pure), read here from the database."""
from django.db.models import Q, Subquery

from runners import contract

from .detect import sensitivity
from .models import Threshold
from .noise import series_noise


def judged_metrics() -> list[str]:
    """Metrics that get a speed verdict: every registry metric with a direction, but 'correct'."""
    return contract.judged_metric_names()


def explicit_threshold(*, benchmark, metric: str) -> float | None:
    """An explicit threshold, most specific first: the benchmark's admin row, its YAML
    `thresholds:`, the admin row for every benchmark; None when none is set."""
    rows = dict(Threshold.objects.filter(Q(benchmark=benchmark) | Q(benchmark=None), metric=metric)
                .values_list("benchmark_id", "relative"))
    return most_specific(benchmark=benchmark, metric=metric, own=rows.get(benchmark.pk), every=rows.get(None))


def most_specific(*, benchmark, metric: str, own: float | None, every: float | None) -> float | None:
    """The order explicit thresholds win in: the benchmark's row (OWN), its YAML map, the row for
    every benchmark (EVERY)."""
    if own is not None:
        return own
    return (benchmark.thresholds or {}).get(metric, every)


def explicit_rows(*, benchmark, metric: str) -> dict:
    """Subqueries of the benchmark's and the global Threshold row, to annotate another query with
    (a page reads them in the query it already makes): own=..., every=..."""
    rows = Threshold.objects.filter(metric=metric)
    return {"own": Subquery(rows.filter(benchmark=benchmark).values("relative")[:1]),
            "every": Subquery(rows.filter(benchmark=None).values("relative")[:1])}


def threshold_for(*, benchmark, metric: str) -> float:
    """The bound without a series' noise (pull-request checks, canaries): explicit, else the default."""
    return sensitivity.bound(metric, explicit=explicit_threshold(benchmark=benchmark, metric=metric)).relative


def bound_for(*, run, metric: str, point: str = "", method: str | None = None) -> sensitivity.Bound:
    """The one bound of RUN's series of METRIC at POINT: what verdicts, change points,
    confirmations and bisections judge with."""
    return sensitivity.bound(metric, noise=series_noise(run, metric, point, method),
                             explicit=explicit_threshold(benchmark=run.benchmark, metric=metric))
