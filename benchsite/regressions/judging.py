"""The verdict arithmetic, pure (no Django): one run's figure against its series' run-to-run
history, with the prediction interval of one new run, t(q, n-1) * s * sqrt(1 + 1/n)."""
from __future__ import annotations

import math
from statistics import fmean, median, stdev

from .sensitivity import counts
from .tstats import t_quantile

IMPROVEMENT, REGRESSION, NO_CHANGE, NOT_ENOUGH_DATA = "improvement", "regression", "no_change", "not_enough_data"
VERDICT_LEVEL = 0.975  # two-sided 95% interval: what the run page shows
STRONG_LEVEL = 0.9995  # two-sided 99.9%: a single run this far off starts a change point at once
# The confirmation re-run must land beyond the old level, toward the new one, by CONFIRM_Z noise
# widths and by CONFIRM_FRACTION of the change. With no change it does so 16% of the time
# (P(Z > 1)); a real step of 2.5 noise widths (5% at 2% noise) fails 6.7% (P(Z < -1.5)), where
# the midpoint rule used before failed 10.6% and let 19-23% of the spurious 3-4% changes through.
# The fraction guards a change started by one extreme run (its "after" is that run): a third of a
# 3.6-noise-width jump. Chosen on seeds 11, 22, 33 of benchmarks/detection_accuracy.py (2% noise),
# reported on its own seeds; docs/measurements.md.
CONFIRM_Z = 1.0
CONFIRM_FRACTION = 1 / 3
# A change whose re-run disagreed gets one more re-run if the detector still finds it, at the same
# commit, with this many runs after it: one unlucky re-run (7% of real 5% steps at 2% noise) no
# longer hides a change for good, and a spurious change rarely survives that many more runs.
SECOND_LOOK_AFTER = 5


def prediction_half_width(history: list[float], level: float = VERDICT_LEVEL) -> float:
    n = len(history)
    return t_quantile(level, n - 1) * stdev(history) * math.sqrt(1 + 1 / n)


def relative_interval(*, value: float, mean: float, half: float) -> tuple[float, float]:
    """The interval of the relative change value/mean - 1, computed on the ratio: the noise is
    relative (a run's spread scales with its level), so the ratio's interval is r * exp(+-h), with
    h the prediction half-width relative to the mean. It always contains the effect and never passes
    -100% (a tok/s or a latency cannot fall below 0). A sign change (a delta metric) keeps the
    plain interval (value - mean +- half) / |mean|."""
    ratio, h = value / mean, half / abs(mean)
    if ratio <= 0 or mean < 0:
        return (value - mean - half) / abs(mean), (value - mean + half) / abs(mean)
    return ratio * math.exp(-h) - 1, ratio * math.exp(h) - 1


def judge(*, value: float, history: list[float], direction: str, threshold: float, incorrect: bool = False,
          min_history: int = 3) -> dict:
    """{'kind', 'baseline', 'effect', 'ci_low', 'ci_high', 'strong', 'note'}: a verdict needs the
    interval to exclude zero (significant) and the effect to reach `threshold` (material)."""
    if len(history) < max(2, min_history):
        return {"kind": NOT_ENOUGH_DATA, "note": f"{len(history)} baseline runs, {max(2, min_history)} needed"}
    mean = fmean(history)
    if mean == 0:
        return {"kind": NOT_ENOUGH_DATA, "baseline": mean, "note": "baseline is 0: no relative change"}
    half = prediction_half_width(history)
    effect = (value - mean) / mean
    ci_low, ci_high = relative_interval(value=value, mean=mean, half=half)
    result = {"baseline": mean, "effect": effect, "ci_low": ci_low, "ci_high": ci_high, "note": "", "strong": False}
    better = effect > 0 if direction == "higher" else effect < 0
    if not counts(effect=effect, ci_low=ci_low, ci_high=ci_high, threshold=threshold):
        return {**result, "kind": NO_CHANGE}
    if better and incorrect:
        return {**result, "kind": NO_CHANGE, "note": "output incorrect: never an improvement"}
    strong = abs(value - mean) > prediction_half_width(history, STRONG_LEVEL)
    return {**result, "kind": IMPROVEMENT if better else REGRESSION, "strong": strong}


def robust_noise(values: list[float]) -> float | None:
    """The run-to-run noise of a series as a standard deviation, from its successive differences:
    1.4826 * median |x[i] - x[i-1]| / sqrt(2). A step or a spike moves one or two differences, not
    their median, so an undetected change does not inflate it. None with fewer than 3 values."""
    if len(values) < 3:
        return None
    return 1.4826 * median(abs(b - a) for a, b in zip(values, values[1:])) / math.sqrt(2)


def confirmation_agrees(*, figure: float, before: float, after: float, noise: float | None) -> bool:
    """Does the re-run of a change's commit confirm it? It must land beyond the level before, in
    the direction of the change, by more than CONFIRM_Z noise widths and CONFIRM_FRACTION of the
    change. Without a noise figure: nearer the level after than the level before."""
    if after == before:
        return False
    if noise is None or noise <= 0:
        return abs(figure - after) < abs(figure - before)
    return (figure - before) * (1.0 if after > before else -1.0) > max(CONFIRM_Z * noise,
                                                                      CONFIRM_FRACTION * abs(after - before))
