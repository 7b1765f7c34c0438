"""The relative change each metric must exceed before a verdict or a change point counts.

Defaults by metric (the registry's names), then a global row, then the benchmark's own row."""
from django.db.models import Q

from runners import contract

from .models import Threshold

# Latency tails are noisier than medians and throughput; 'correct' is judged on its own (0 or 1).
DEFAULT_THRESHOLDS: dict[str, float] = {
    contract.DECODE_TOK_S: 0.03,
    contract.TTFT_MS: 0.05,
    contract.ITL_MS_P50: 0.03,
    contract.ITL_MS_P90: 0.05,
    contract.ITL_MS_P99: 0.10,
    contract.ALLREDUCE_SHARE: 0.05,
    contract.ALLREDUCE_US_PER_CALL: 0.05,
    contract.COMM_US_PER_CALL: 0.05,
    contract.CEILING_TOK_S: 0.05,
}
FALLBACK_THRESHOLD = 0.05


def judged_metrics() -> list[str]:
    """Metrics that get a speed verdict: every registry metric with a direction, but 'correct'."""
    return [name for name, m in contract.METRICS.items() if m.direction != "none" and name != contract.CORRECT]


def threshold_for(*, benchmark, metric: str) -> float:
    rows = dict(Threshold.objects.filter(Q(benchmark=benchmark) | Q(benchmark=None), metric=metric)
                .values_list("benchmark_id", "relative"))
    if benchmark.pk in rows:
        return rows[benchmark.pk]
    if None in rows:
        return rows[None]
    return DEFAULT_THRESHOLDS.get(metric, FALLBACK_THRESHOLD)
