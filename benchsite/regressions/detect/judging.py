"""The verdict arithmetic: one run's figure against its series' run-to-run history, with the
prediction interval of one new run, t(q, n-1) * s * sqrt(1 + 1/n); and the rule a confirmation's
re-runs are judged by, in the series' robust noise."""
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
    """The half-width of the prediction interval of one new run, t(level, n-1) * s * sqrt(1 + 1/n).

    Parameters
    ----------
    history : list of float
        The series' earlier figures, at least 2.
    level : float
        The quantile of t: VERDICT_LEVEL (two-sided 95%) or STRONG_LEVEL (99.9%).

    Returns
    -------
    float
        The half-width, in the figures' unit.

    References
    ----------
    .. [1] G. J. Hahn and W. Q. Meeker, Statistical Intervals: A Guide for Practitioners, Wiley,
       section 4.7 (a prediction interval for one future observation of a normal sample), 1991.
    """
    n = len(history)
    return t_quantile(level, n - 1) * stdev(history) * math.sqrt(1 + 1 / n)


def relative_interval(*, value: float, mean: float, half: float) -> tuple[float, float]:
    """The interval of the relative change value/mean - 1, computed on the ratio.

    The noise is relative (a run's spread scales with its level), so the ratio's interval is
    r * exp(+-h), with h the prediction half-width relative to the mean. It always contains the
    effect and never passes -100% (a tok/s or a latency cannot fall below 0).

    Parameters
    ----------
    value : float
        The run's figure.
    mean : float
        The history's mean, not 0.
    half : float
        The prediction half-width (`prediction_half_width`), in the figures' unit.

    Returns
    -------
    (float, float)
        The low and high ends as relative changes (-0.05 = -5%). A sign change (a delta metric)
        keeps the plain interval (value - mean +- half) / |mean|.

    References
    ----------
    .. [1] README.md, "Regression verdicts and alerts".
    """
    ratio, h = value / mean, half / abs(mean)
    if ratio <= 0 or mean < 0:
        return (value - mean - half) / abs(mean), (value - mean + half) / abs(mean)
    return ratio * math.exp(-h) - 1, ratio * math.exp(h) - 1


def judge(*, value: float, history: list[float], direction: str, threshold: float, incorrect: bool = False,
          min_history: int = 3) -> dict:
    """The verdict of one run's figure against its series' history.

    A verdict needs the prediction interval to exclude zero (significant) and the effect to reach
    `threshold` (material): `sensitivity.counts`.

    Parameters
    ----------
    value : float
        The run's figure.
    history : list of float
        The series' earlier figures (the baseline).
    direction : str
        'higher' when a higher figure is better, else lower is.
    threshold : float
        The relative change that counts (the series' bound, `sensitivity.bound`).
    incorrect : bool
        The run's output was wrong: it is never an improvement.
    min_history : int
        The fewest earlier figures to judge on (never below 2).

    Returns
    -------
    dict
        'kind' (IMPROVEMENT, REGRESSION, NO_CHANGE or NOT_ENOUGH_DATA) and 'note'; once judged also
        'baseline' (the history's mean), 'effect' (the relative change), 'ci_low', 'ci_high'
        (`relative_interval`) and 'strong' (beyond the STRONG_LEVEL interval: a change point at
        once).

    References
    ----------
    .. [1] G. J. Hahn and W. Q. Meeker, Statistical Intervals: A Guide for Practitioners, Wiley,
       1991 (the prediction interval).
    """
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
    1.4826 * median |x[i] - x[i-1]| / sqrt(2).

    A step or a spike moves one or two differences, not their median, so an undetected change does
    not inflate it.

    Parameters
    ----------
    values : list of float
        The series' figures, oldest first.

    Returns
    -------
    float or None
        The noise in the figures' unit; None with fewer than 3 values.

    References
    ----------
    .. [1] J. von Neumann et al., "The mean square successive difference", Ann. Math. Stat.
       12(2), 153-162, 1941.
    .. [2] P. J. Rousseeuw and C. Croux, "Alternatives to the median absolute deviation",
       J. Am. Stat. Assoc. 88(424), 1273-1283, 1993 (1.4826: the median's consistency at the normal).
    """
    if len(values) < 3:
        return None
    return 1.4826 * median(abs(b - a) for a, b in zip(values, values[1:])) / math.sqrt(2)


AGREES, DISAGREES, UNDECIDED = "agrees", "disagrees", "undecided"


def confirmation_look(*, figures: list[float], before: float, after: float, noise: float | None) -> str:
    """The re-runs of a change's commit so far, looked at as a check looks.

    Their mean agrees when it lands beyond the level before, toward the change, by CONFIRM_Z noise
    widths of a mean of that many (noise / sqrt(k)) and by CONFIRM_FRACTION of the change (one
    re-run: `confirmation_agrees`); it disagrees when even its far edge (the mean plus those noise
    widths) stays short of that fraction; between the two another re-run can tell.

    Parameters
    ----------
    figures : list of float
        The re-runs' figures, at least one.
    before, after : float
        The series' levels before and after the change.
    noise : float or None
        The series' noise (`robust_noise`), in the figures' unit; without it, nearer the level
        after than before agrees and anything else disagrees.

    Returns
    -------
    str
        AGREES, DISAGREES or UNDECIDED.

    References
    ----------
    .. [1] docs/methods/change-detection.md; the constants chosen with
       benchmarks/detection_accuracy.py.
    """
    mean = sum(figures) / len(figures)
    if confirmation_agrees(figure=mean, before=before, after=after,
                           noise=noise / math.sqrt(len(figures)) if noise else noise):
        return AGREES
    if after == before or not noise or noise <= 0:
        return DISAGREES
    moved = (mean - before) * (1.0 if after > before else -1.0)
    far_edge = moved + CONFIRM_Z * noise / math.sqrt(len(figures))
    return DISAGREES if far_edge < CONFIRM_FRACTION * abs(after - before) else UNDECIDED


def confirmation_agrees(*, figure: float, before: float, after: float, noise: float | None) -> bool:
    """Does the re-run of a change's commit confirm it?

    It must land beyond the level before, in the direction of the change, by more than CONFIRM_Z
    noise widths and CONFIRM_FRACTION of the change.

    Parameters
    ----------
    figure : float
        The re-run's figure.
    before, after : float
        The series' levels before and after the change.
    noise : float or None
        The series' noise (`robust_noise`), in the figures' unit; without it (or at 0), the re-run
        must be nearer the level after than the level before.

    Returns
    -------
    bool
        True when the re-run confirms the change; never for a change of 0.

    References
    ----------
    .. [1] docs/methods/change-detection.md; the constants chosen with
       benchmarks/detection_accuracy.py.
    """
    if after == before:
        return False
    if noise is None or noise <= 0:
        return abs(figure - after) < abs(figure - before)
    return (figure - before) * (1.0 if after > before else -1.0) > max(CONFIRM_Z * noise,
                                                                      CONFIRM_FRACTION * abs(after - before))
