"""Small, dependency-free statistics for probe results (standard library only).

- `median(values)`; `median_low(values)`: the lower of the two middle values, always an
  observed value (for counts, e.g. allreduce calls per step).
- `percentile(values, p)`: linear interpolation between closest ranks, the same definition as
  numpy's default (`method="linear"`): rank h = (n - 1) * p / 100, value = x[floor h] +
  (h - floor h) * (x[floor h + 1] - x[floor h]).
- `percentiles(values)`: {"p50", "p90", "p99"}.
- `median_ci(values, confidence=0.95)`: a DISTRIBUTION-FREE confidence interval of the median
  from order statistics (no resampling, no seed, deterministic). For sorted x(1) <= ... <= x(n)
  the interval [x(j), x(n-j+1)] covers the true median with probability
  1 - 2 * P(Binomial(n, 1/2) <= j - 1); we take the largest j (narrowest interval) whose
  coverage is still >= `confidence`. With few repeats no such j exists (n <= 5 for 95%): the
  interval is then [min, max], whose actual coverage is 1 - 2**(1-n) (75% for n = 3, 93.75%
  for n = 5); `median_ci_coverage` says what coverage a returned interval really has.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

__all__ = ["median", "median_low", "mean", "percentile", "percentiles", "median_ci", "median_ci_coverage", "summarize"]


def _clean(values: Iterable[float]) -> list[float]:
    out = [float(v) for v in values]
    if not out:
        raise ValueError("no values")
    for v in out:
        if math.isnan(v):
            raise ValueError("NaN in values")
    return out


def _clean_keep(values: Iterable) -> list:
    """Like _clean, keeping the values' type (ints stay ints)."""
    out = list(values)
    _clean(out)
    return out


def median(values: Iterable[float]) -> float:
    return statistics.median(_clean(values))


def median_low(values: Iterable[float]) -> float:
    return statistics.median_low(_clean_keep(values))


def mean(values: Iterable[float]) -> float:
    return statistics.fmean(_clean(values))


def percentile(values: Iterable[float], p: float) -> float:
    """p in [0, 100]; linear interpolation between closest ranks (numpy's default)."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    xs = sorted(_clean(values))
    h = (len(xs) - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def percentiles(values: Iterable[float], ps: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    xs = _clean(values)
    return {f"p{p:g}": percentile(xs, p) for p in ps}


def _binom_cdf_half(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), exact."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2.0**n


def _order_index(n: int, confidence: float) -> int:
    """1-based j of the interval [x(j), x(n-j+1)]; 1 when even [min, max] falls short."""
    best = 1
    for j in range(1, n // 2 + 1):
        if 1.0 - 2.0 * _binom_cdf_half(j - 1, n) >= confidence:
            best = j
        else:
            break
    return best


def median_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free order-statistic CI of the median: (low, high). See module doc."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be within (0, 1)")
    xs = sorted(_clean(values))
    n = len(xs)
    if n == 1:
        return (xs[0], xs[0])
    j = _order_index(n, confidence)
    return (xs[j - 1], xs[n - j])


def median_ci_coverage(n: int, confidence: float = 0.95) -> float:
    """The actual coverage of the interval `median_ci` returns for n values (0 for n = 1)."""
    if n < 2:
        return 0.0
    j = _order_index(n, confidence)
    return 1.0 - 2.0 * _binom_cdf_half(j - 1, n)


def summarize(values: Iterable[float], confidence: float = 0.95) -> dict:
    xs = _clean(values)
    low, high = median_ci(xs, confidence)
    return {
        "n": len(xs),
        "median": median(xs),
        "mean": mean(xs),
        "min": min(xs),
        "max": max(xs),
        "ci": [low, high],
        "ci_coverage": median_ci_coverage(len(xs), confidence),
        **percentiles(xs),
    }
