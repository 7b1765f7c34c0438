"""E-Divisive means change-point detection (Matteson & James 2014), clean room, deterministic.

Pure numpy, no Django. The split statistic is E-Divisive's q-hat (energy distance between the
segment before and after a candidate, maximised over the candidate and the end of the second
segment); the significance test is Student's two-sample t-test on the two segments, as in
Hunter/Apache Otava (Fleming et al. 2023), instead of the permutation test whose results change
from one call to the next. Three guards against E-Divisive's known pitfalls:

* `min_size`: no segment is shorter than this, and the segments' medians must move at least
  half as far as their means: a single spike inside a short segment is never a change point;
* the t-test and the merge step use only the points between neighbouring change points, so a
  large step already found does not inflate the variance that hides a later, smaller one;
* a merge step drops the weakest change point (largest p, or smallest change below
  `min_change`) and re-tests its neighbours, until every one left is significant.

    detect([100, 101, 99, 100, 94, 95, 94, 93], min_size=3)
    # [ChangePoint(index=4, before=100.0, after=94.0, change=-0.06, pvalue=...)]
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .tstats import t_test_p

DEFAULT_MIN_SIZE = 3
DEFAULT_MAX_PVALUE = 0.001


@dataclass(frozen=True)
class ChangePoint:
    """One change point that `detect` found, with the levels on either side."""
    index: int  # position of the first point after the change
    before: float  # mean of the segment before (back to the previous change point)
    after: float  # mean of the segment after (up to the next change point)
    change: float | None  # (after - before) / before; None when before is 0
    pvalue: float  # t-test p-value times 1 + ln(number of candidate positions)
    qhat: float
    robust: bool = True  # the medians moved at least half as far as the means, the same way


class _Energy:
    """Prefix sums of the pairwise distance matrix, so any block sum is O(1)."""

    def __init__(self, x: np.ndarray):
        dist = np.abs(x[:, None] - x[None, :])
        self.P = np.zeros((len(x) + 1, len(x) + 1))
        self.P[1:, 1:] = dist.cumsum(axis=0).cumsum(axis=1)

    def block(self, a1, a2, b1, b2):
        P = self.P
        return P[a2, b2] - P[a1, b2] - P[a2, b1] + P[a1, b1]

    def best_split(self, start: int, end: int, min_size: int) -> tuple[int, int, float] | None:
        """(tau, kappa, qhat) maximising q-hat over start < tau < kappa <= end with both segments
        [start, tau) and [tau, kappa) at least `min_size` long; None if the interval is too short."""
        taus = np.arange(start + min_size, end - min_size + 1)
        if len(taus) == 0:
            return None
        kappas = np.arange(start + 2 * min_size, end + 1)
        T, K = np.meshgrid(taus, kappas, indexing="ij")
        valid = K - T >= min_size
        n, m = (T - start).astype(float), (K - T).astype(float)
        between = self.block(start, T, T, K)
        within_x = self.block(start, T, start, T) / 2.0
        within_y = self.block(T, K, T, K) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):  # cells outside `valid` are discarded
            q = (2.0 / (m + n)) * between - (2.0 * m / ((m + n) * (n - 1))) * within_x \
                - (2.0 * n / ((m + n) * (m - 1))) * within_y
        q = np.where(valid, q, -np.inf)
        i, j = np.unravel_index(int(np.argmax(q)), q.shape)  # first maximum: deterministic ties
        return int(taus[i]), int(kappas[j]), float(q[i, j])


def _bounds(indices: list[int], length: int) -> list[tuple[int, int]]:
    edges = [0, *indices, length]
    return list(zip(edges[:-1], edges[1:]))


def _adjusted_p(p: float, start: int, end: int, min_size: int) -> float:
    """The best of k candidate splits of noise looks more significant than one split: scale p by
    1 + ln k. Neighbouring splits share almost all their points, so the maximum of the scan grows
    like log k, not like k (full Bonferroni, p * k, missed 5% steps at 2% noise for 7 points
    in benchmarks/detection_accuracy.py; no correction doubled the false alarms)."""
    return min(1.0, p * (1.0 + math.log(max(1, end - start - 2 * min_size + 1))))


def _describe(x: np.ndarray, start: int, index: int, end: int, qhat: float, min_size: int) -> ChangePoint:
    left, right = x[start:index], x[index:end]
    before, after = float(left.mean()), float(right.mean())
    change = (after - before) / before if before != 0 else None
    shift = float(np.median(right) - np.median(left))
    robust = shift * (after - before) > 0 and abs(shift) >= abs(after - before) / 2
    return ChangePoint(index=index, before=before, after=after, change=change,
                       pvalue=_adjusted_p(t_test_p(left.tolist(), right.tolist()), start, end, min_size), qhat=qhat,
                       robust=robust)


def _split(x: np.ndarray, energy: _Energy, min_size: int, max_pvalue: float) -> dict[int, float]:
    """Divisive step: split the interval whose best candidate has the largest q-hat, while
    that split is significant. Returns {index: qhat}."""
    found: dict[int, float] = {}
    cache: dict[tuple[int, int], tuple[int, int, float] | None] = {}
    while True:
        best = None
        for start, end in _bounds(sorted(found), len(x)):
            if (start, end) not in cache:
                cache[(start, end)] = energy.best_split(start, end, min_size)
            candidate = cache[(start, end)]
            if candidate is not None and (best is None or candidate[2] > best[3]):
                best = (start, *candidate)
        if best is None:
            return found
        # The test compares the two segments q-hat compared, [start, tau) and [tau, kappa): a
        # later change beyond kappa does not inflate their variance.
        start, tau, kappa, qhat = best
        if _adjusted_p(t_test_p(x[start:tau].tolist(), x[tau:kappa].tolist()), start, kappa, min_size) > max_pvalue:
            return found
        found[tau] = qhat


def _weakness(cp: ChangePoint, max_pvalue: float, min_change: float) -> float | None:
    """How far a change point fails the bar (None when it passes)."""
    if cp.pvalue > max_pvalue:
        return 1.0 + cp.pvalue
    if not cp.robust:
        return 1.0  # one outlier carried the means: a spike, not a step
    size = abs(cp.change) if cp.change is not None else float("inf")
    if size < min_change:
        return 1.0 - size  # below 1: a non-significant one is always dropped first
    return None


def _merge(x: np.ndarray, found: dict[int, float], min_size: int, max_pvalue: float,
           min_change: float) -> list[ChangePoint]:
    """Drop the weakest change point until all pass, re-testing against the new neighbours."""
    indices = sorted(found)
    while True:
        edges = [0, *indices, len(x)]
        cps = [_describe(x, edges[k], idx, edges[k + 2], found[idx], min_size) for k, idx in enumerate(indices)]
        failing = [(w, k) for k, cp in enumerate(cps) if (w := _weakness(cp, max_pvalue, min_change)) is not None]
        if not failing:
            return cps
        _, k = max(failing)
        del indices[k]


def detect(values, *, min_size: int = DEFAULT_MIN_SIZE, max_pvalue: float = DEFAULT_MAX_PVALUE,
           min_change: float = 0.0) -> list[ChangePoint]:
    """Change points of one series, by E-Divisive means with a t-test for significance.

    Parameters
    ----------
    values : sequence of float
        The series, oldest first; finite numbers.
    min_size : int
        The fewest points of a segment, at least 2 (one point is a spike, not a level).
    max_pvalue : float
        The largest p-value of a change point kept, after the 1 + ln k scan correction.
    min_change : float
        A relative size (0.03 = 3%) below which a significant change is still not reported.

    Returns
    -------
    list of ChangePoint
        The change points in the order of the series; empty for a series shorter than two
        segments.

    Raises
    ------
    ValueError
        When `min_size` is below 2 or `values` is not a flat sequence of finite numbers.

    References
    ----------
    .. [1] D. S. Matteson and N. A. James, "A nonparametric approach for multiple change point
       analysis of multivariate data", J. Am. Stat. Assoc. 109(505), 334-345, 2014.
    .. [2] M. Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
       Regressions", ICPE 2023 (the t-test in place of the permutation test).
    """
    if min_size < 2:
        raise ValueError("min_size must be at least 2 (a segment of one point is a spike)")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("values must be a flat sequence of finite numbers")
    if len(x) < 2 * min_size:
        return []
    found = _split(x, _Energy(x), min_size, max_pvalue)
    return _merge(x, found, min_size, max_pvalue, min_change)
