"""The bound a change must reach before a verdict, a change point, a confirmation or a bisection
step counts it: explicit thresholds first, then the rule from the series' noise
(regressions.sensitivity, pure), read here from the database."""
from django.db.models import Q

from runners import contract

from . import sensitivity
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
    if benchmark.pk in rows:
        return rows[benchmark.pk]
    if metric in (benchmark.thresholds or {}):
        return benchmark.thresholds[metric]
    return rows.get(None)


def threshold_for(*, benchmark, metric: str) -> float:
    """The bound without a series' noise (pull-request checks, canaries): explicit, else the default."""
    return sensitivity.bound(metric, explicit=explicit_threshold(benchmark=benchmark, metric=metric)).relative


def bound_for(*, run, metric: str, point: str = "", method: str | None = None) -> sensitivity.Bound:
    """The one bound of RUN's series of METRIC at POINT: what verdicts, change points,
    confirmations and bisections judge with."""
    return sensitivity.bound(metric, noise=series_noise(run, metric, point, method),
                             explicit=explicit_threshold(benchmark=run.benchmark, metric=metric))
