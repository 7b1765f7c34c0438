"""Student's t distribution without scipy: the two-sample t-test that the change-point detector
and the verdicts use as their deterministic significance test (no permutations, no seed).

    t_test_p(left, right)     # two-sided p-value of Student's pooled two-sample t-test
    t_quantile(0.975, 9)      # 2.262..., for a confidence interval
"""
from __future__ import annotations

import math
from statistics import fmean


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (p in (0.5, 1)), by bisection on the distribution function."""
    if not 0.5 < p < 1.0:
        raise ValueError("p must lie in (0.5, 1)")
    target = 2.0 * (1.0 - p)  # two-sided tail mass
    lo, hi = 0.0, 1.0
    while t_sf_two_sided(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf_two_sided(mid, df) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _sum_sq(values, mean):
    return sum((v - mean) ** 2 for v in values)


def t_test_p(left, right) -> float:
    """Two-sided p-value of Student's two-sample t-test with pooled variance. Two constant
    samples: 0 when their means differ, 1 when equal."""
    n, m = len(left), len(right)
    if n == 0 or m == 0 or n + m < 3:
        return 1.0
    mean_l, mean_r = fmean(left), fmean(right)
    df = n + m - 2
    pooled = (_sum_sq(left, mean_l) + _sum_sq(right, mean_r)) / df
    if pooled <= 0.0:
        return 0.0 if mean_l != mean_r else 1.0
    t = (mean_r - mean_l) / math.sqrt(pooled * (1.0 / n + 1.0 / m))
    return t_sf_two_sided(t, df)
