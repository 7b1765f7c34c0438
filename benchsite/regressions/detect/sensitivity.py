"""How large a change must be to count, pure (no Django): the one rule that verdicts, change
points, confirmations and bisection steps share.

A change counts when its interval excludes zero (significant) and its estimate reaches the
series' bound (material). The bound is, in order:

* an explicit threshold (an admin `Threshold` row, a benchmark's YAML `thresholds:`);
* with the series' noise known from at least MIN_STARTS engine starts: the larger of the
  metric's floor and K times that noise (the relative standard deviation of one run's figure
  between engine starts of the same code);
* else the fixed default of before: an unknown noise never makes the service more trigger-happy.

K = 1.5: at 2% noise the bound is the 3% the service used for decode throughput, so the figure
measured there (steps of 5-10% found 19 times in 20, under 1 false alarm per 1,000 points) holds;
at 0.08% noise (an H200 with CUDA graphs) the floor of 0.5% decides. docs/methods/sensitivity.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

from runners import contract

K = 1.5
MIN_STARTS = 6


def check_floors(floors) -> dict[str, float]:
    """Checked floors: each key a judged metric, each floor a relative change above 0 and below 1.

    Parameters
    ----------
    floors : dict of str to float
        Metric name to floor (0.005 = 0.5%).

    Returns
    -------
    dict of str to float
        The same floors, as floats.

    Raises
    ------
    runners.contract.ContractError
        Naming the metric or the floor that is not valid.
    """
    return {contract.check_judged_metric(m, "a floor's metric"): contract.check_relative(v, f"the floor of {m}")
            for m, v in floors.items()}


# The smallest change worth reporting however quiet the series: below it a change is real but
# too small to act on (a tok/s median moves less than a tail).
FLOORS: dict[str, float] = check_floors({
    contract.DECODE_TOK_S: 0.005, contract.SLOWEST_STREAM_TOK_S: 0.005, contract.AGGREGATE_TOK_S: 0.005,
    contract.ITL_MS_P50: 0.005,
    contract.TTFT_MS: 0.02, contract.ITL_MS_P90: 0.02, contract.ALLREDUCE_SHARE: 0.02, contract.CEILING_TOK_S: 0.02,
    contract.ALLREDUCE_US_PER_CALL: 0.02, contract.COMM_US_PER_CALL: 0.02,
    contract.ITL_MS_P99: 0.05, contract.LAUNCH_GAP_MS: 0.05,
})
# The fixed thresholds used while a series' noise is unknown, and the floor of metrics without one.
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
# A change found 19 times in 20 at a two-sided 95% level: z(0.975) + z(0.95).
_Z_DETECT = 1.959964 + 1.644854
# The successive-difference estimate is about as informative as a third of its differences would
# be as a standard deviation: its weight against same-code spread when both are pooled.
_MASD_EFFICIENCY = 0.37


def default_threshold(metric: str) -> float:
    """The fixed threshold of METRIC while its series' noise is unknown (FALLBACK_THRESHOLD for a
    metric without one)."""
    return DEFAULT_THRESHOLDS.get(metric, FALLBACK_THRESHOLD)


def floor(metric: str) -> float:
    """The metric's floor; a metric without one keeps its fixed threshold as its floor."""
    return FLOORS.get(metric, default_threshold(metric))


@dataclass(frozen=True)
class Noise:
    """The run-to-run noise of a series (`noise_estimate`) and what it was estimated from."""
    relative: float  # the standard deviation of one run's figure over its level
    starts: int  # the engine starts it was estimated from
    same_code: int = 0  # of them, starts sharing their commit with another (re-runs, confirmations)

    @property
    def known(self) -> bool:
        return self.starts >= MIN_STARTS

    def describe(self) -> str:
        return f"noise {short_percent(self.relative)} over {self.starts} starts"


def noise_estimate(points, same_code=()) -> Noise | None:
    """The relative run-to-run noise of a series.

    Two sources, pooled by their degrees of freedom: the spread of runs of the same commit about
    their own mean (confirmations, re-runs: no code change between them), and the median absolute
    successive difference of the whole series on the log scale, 1.4826 * median |ln x[i] -
    ln x[i-1]| / sqrt(2) (relative at every level: a series that fell tenfold keeps its noise): a
    step moves one difference and a single outlier two, not their median, so neither inflates it.

    Parameters
    ----------
    points : iterable of (str, float or None)
        The series' (commit, figure), oldest first; figures that are None or not positive are left out.
    same_code : iterable of (str, float or None)
        Runs outside the series' order (a canary's fixed commit, the starts of a pull-request
        check): they add to the same-code spread only.

    Returns
    -------
    Noise or None
        None with fewer than 3 positive figures in the series.

    References
    ----------
    .. [1] P. J. Rousseeuw and C. Croux, "Alternatives to the median absolute deviation",
       J. Am. Stat. Assoc. 88(424), 1273-1283, 1993 (1.4826).
    .. [2] docs/methods/sensitivity.md, "The noise of a series".
    """
    points = [(commit, float(v)) for commit, v in points if v is not None and v > 0]
    extra = [(commit, float(v)) for commit, v in same_code if commit and v is not None and v > 0]
    if len(points) < 3:
        return None
    logs = [math.log(v) for _, v in points]
    diffs = [abs(b - a) for a, b in zip(logs, logs[1:])]
    masd = 1.4826 * median(diffs) / math.sqrt(2)
    # Many steps and hiccups (a fifth of the differences) still lift that median: once more
    # without the differences beyond 4.5 noise widths of a difference, which noise alone
    # almost never makes (1 in 100,000).
    kept = [d for d in diffs if d <= 4.5 * math.sqrt(2) * masd] or diffs
    masd = 1.4826 * median(kept) / math.sqrt(2)
    groups: dict[str, list[float]] = {}
    for commit, v in points:
        if commit:
            groups.setdefault(commit, []).append(v)
    for commit, v in extra:
        groups.setdefault(f"elsewhere {commit}", []).append(v)
    same_ss = same_df = same_n = 0
    for values in groups.values():
        if len(values) > 1:
            mean = sum(values) / len(values)
            same_ss += sum((v / mean - 1) ** 2 for v in values)
            same_df += len(values) - 1
            same_n += len(values)
    masd_df = _MASD_EFFICIENCY * (len(logs) - 1)
    variance = (same_ss + masd_df * masd ** 2) / (same_df + masd_df)
    return Noise(relative=math.sqrt(variance), starts=len(points) + len(extra), same_code=same_n)


@dataclass(frozen=True)
class Bound:
    """The smallest relative change that counts, and why: source 'explicit', 'floor', 'noise' or
    'default' (the noise not known yet)."""
    relative: float
    source: str
    noise: Noise | None = None

    def describe(self) -> str:
        """'threshold 0.5% (floor); noise 0.08% over 14 starts'."""
        return f"threshold {short_percent(self.relative)} {self.reason()}"

    def reason(self) -> str:
        """'(floor); noise 0.08% over 14 starts'."""
        text = f"({self.label()})"
        return f"{text}; {self.noise.describe()}" if self.noise is not None else text

    def label(self) -> str:
        """Which bound decided: 'floor', '1.5 x noise', 'set for this benchmark' or the default's."""
        return {"explicit": "set for this benchmark", "floor": "floor", "noise": f"{K:g} x noise",
                "default": f"default: noise known after {MIN_STARTS} starts"}[self.source]


def bound(metric: str, *, noise: Noise | None = None, explicit: float | None = None) -> Bound:
    """The bound a change must reach to count (the order is the module doc's).

    Parameters
    ----------
    metric : str
        The judged metric.
    noise : Noise or None
        The series' noise (`noise_estimate`); it decides once `Noise.known`.
    explicit : float or None
        A threshold set for the series (an admin `Threshold`, the benchmark's `thresholds:`).

    Returns
    -------
    Bound
        The relative change and which bound decided it.

    References
    ----------
    .. [1] docs/methods/sensitivity.md.
    """
    if explicit is not None:
        return Bound(explicit, "explicit", noise)
    if noise is None or not noise.known:
        return Bound(default_threshold(metric), "default", noise)
    base, scaled = floor(metric), K * noise.relative
    return Bound(scaled, "noise", noise) if scaled > base else Bound(base, "floor", noise)


def counts(*, effect: float, ci_low: float | None, ci_high: float | None, threshold: float) -> bool:
    """Does a change count?

    Parameters
    ----------
    effect : float
        The relative change.
    ci_low, ci_high : float or None
        Its interval.
    threshold : float
        The series' bound (`bound`).

    Returns
    -------
    bool
        True when the interval excludes zero (significant) and the effect reaches the threshold
        (material); False without an interval.
    """
    if ci_low is None or ci_high is None:
        return False
    return (ci_low > 0 or ci_high < 0) and abs(effect) >= threshold


def visible_change(noise: Noise, starts: int, threshold: float) -> float:
    """The smallest change a comparison of two sides can find (`detectable` for this noise).

    Parameters
    ----------
    noise : Noise
        The series' noise.
    starts : int
        The engine starts of each side.
    threshold : float
        The series' bound.

    Returns
    -------
    float
        The relative change found 19 times in 20 at a two-sided 95% level, never below THRESHOLD.
    """
    return detectable(noise.relative, starts, threshold)


def detectable(spread: float, starts: int, threshold: float) -> float:
    """The smallest change found 19 times in 20 by comparing two means of STARTS starts each at a
    two-sided 95% level: (z(0.975) + z(0.95)) * spread * sqrt(2 / starts).

    Parameters
    ----------
    spread : float
        The relative spread between starts (a standard deviation of the logarithm).
    starts : int
        The engine starts of each side.
    threshold : float
        The series' bound.

    Returns
    -------
    float
        That change, never below THRESHOLD.

    References
    ----------
    .. [1] J. Cohen, Statistical Power Analysis for the Behavioral Sciences, 2nd ed., 1988 (the
       power of a two-sample comparison of means).
    """
    return max(threshold, _Z_DETECT * spread * math.sqrt(2 / starts))


def short_percent(x: float) -> str:
    """A threshold or a noise in two significant digits: 0.0008 -> '0.08%', 0.005 -> '0.5%',
    0.03 -> '3%', 0.287 -> '29%'."""
    text = f"{x * 100:.2g}" if x * 100 < 10 else f"{x * 100:.0f}"
    return f"{float(text):g}%"
