"""Adding engine starts while a comparison cannot decide, with its false-alarm rate held over
the repeated looks (pure; numpy only).

A check looks after `first` starts a side, then after each further start a side, up to `cap`.
Every look uses the same nominal level, Pocock's: the constant c for which a two-sided test at
|Z| >= c on every look of that schedule rejects a true null with probability ALPHA overall. The
looks' information grows with the starts a side (the variance of a difference of means falls as
1/n), so c is computed for that very schedule by the recursive integration of Armitage,
McPherson and Rowe (the density of the running sum on a grid, carried from look to look within
the continuation region), not read from the table for equally spaced looks.

    look_quantile(2, 6)   # Phi(c) for the looks at 2, 3, 4, 5 and 6 starts a side
    decided(effect, ci_low, ci_high, threshold)

A look of fewer than two starts a side has no interval between starts: it never decides a change.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

from .sensitivity import counts

if TYPE_CHECKING:
    import numpy as np

# Two-sided, over all looks. A same-code check that runs to its cap spends all of it: at 5% one
# alarmed 3.3% of the time at 2% normal noise; at 1%, 1.1-1.5% on the CPU engine's recorded
# starts (heavy tails, a noise estimate of 8 starts); at 0.5%, 0.4-0.8% there, finding 25% slowdowns
# where 1% found 24% (docs/methods/sensitivity.md, "Pull-request checks: adaptive starts").
ALPHA = 0.005
MIN_STARTS_TO_DECIDE = 2
_GRID = 401            # points of the running sum's grid at each look (Simpson's rule)


def looks(first: int, cap: int) -> tuple[int, ...]:
    """The schedule of looks of a check: the starts a side at which it may decide.

    Parameters
    ----------
    first : int
        The starts a side of the first look.
    cap : int
        The most starts a side.

    Returns
    -------
    tuple of int
        Increasing, never below two (one start a side gives no interval between starts); (cap,)
        when the cap is below two.
    """
    if cap < MIN_STARTS_TO_DECIDE:
        return (cap,)
    return tuple(range(max(first, MIN_STARTS_TO_DECIDE), cap + 1))


def _simpson(x: np.ndarray) -> np.ndarray:
    import numpy as np  # here, not at the top: the web side's every process imports this module

    h = (x[-1] - x[0]) / (len(x) - 1)
    w = np.ones(len(x))
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w * h / 3


def _normal(x: np.ndarray, var: float) -> np.ndarray:
    import numpy as np

    return np.exp(-x * x / (2 * var)) / math.sqrt(2 * math.pi * var)


def _crossing(c: float, info: tuple[float, ...]) -> float:
    """P(|Z_k| >= c at some look) under the null, Z_k the running sum at information info[k] over
    its standard deviation."""
    import numpy as np

    x = np.linspace(-c * math.sqrt(info[0]), c * math.sqrt(info[0]), _GRID)
    f = _normal(x, info[0])
    for before, now in zip(info, info[1:]):
        carried = f * _simpson(x)
        x_now = np.linspace(-c * math.sqrt(now), c * math.sqrt(now), _GRID)
        f = _normal(x_now[:, None] - x[None, :], now - before) @ carried
        x = x_now
    return 1.0 - float(f @ _simpson(x))


@lru_cache(maxsize=512)
def pocock_constant(schedule: tuple[int, ...], alpha: float = ALPHA) -> float:
    """Pocock's constant: the |Z| that every look of the schedule is tested at, so that the
    check alarms under no change with probability `alpha` over all its looks.

    Parameters
    ----------
    schedule : tuple of int
        The starts a side at each look, increasing (`looks`): each look's information.
    alpha : float
        The two-sided false-alarm rate over all looks.

    Returns
    -------
    float
        c, by bisection on the crossing probability to 1e-6.

    References
    ----------
    .. [1] S. J. Pocock, "Group sequential methods in the design and analysis of clinical
       trials", Biometrika 64(2), 191-199, 1977.
    .. [2] P. Armitage, C. K. McPherson and B. C. Rowe, "Repeated significance tests on
       accumulating data", J. R. Stat. Soc. A 132(2), 235-244, 1969 (the recursive integration).
    """
    info = tuple(float(n) for n in schedule)
    low, high = 1.0, 6.0
    while high - low > 1e-6:
        mid = (low + high) / 2
        low, high = (mid, high) if _crossing(mid, info) > alpha else (low, mid)
    return (low + high) / 2


def look_quantile(first: int, cap: int, alpha: float = ALPHA) -> float:
    """The quantile each look's two-sided interval is taken at.

    Parameters
    ----------
    first, cap : int
        The check's schedule (`looks`).
    alpha : float
        The two-sided false-alarm rate over all looks.

    Returns
    -------
    float
        Phi(c), c Pocock's constant of the schedule (`pocock_constant`); 1 - alpha / 2 for a
        single look.
    """
    schedule = looks(first, cap)
    if len(schedule) == 1:
        return 1 - alpha / 2
    return 0.5 * (1 + math.erf(pocock_constant(schedule, alpha) / math.sqrt(2)))


def decided(effect: float | None, ci_low: float | None, ci_high: float | None, threshold: float) -> bool:
    """Can a look stop?

    Parameters
    ----------
    effect : float or None
        The relative change at this look.
    ci_low, ci_high : float or None
        Its interval, at the look's quantile (`look_quantile`).
    threshold : float
        The relative change that counts.

    Returns
    -------
    bool
        True when the change counts (`sensitivity.counts`: the interval excludes zero and the
        estimate reaches the threshold), or when the whole interval lies within +-threshold (no
        change of that size); False for an interval that straddles the threshold, or none: it
        asks for another start.

    References
    ----------
    .. [1] docs/methods/sensitivity.md, "Pull-request checks: adaptive starts".
    """
    if effect is None or ci_low is None or ci_high is None:
        return False
    if counts(effect=effect, ci_low=ci_low, ci_high=ci_high, threshold=threshold):
        return True
    return -threshold < ci_low and ci_high < threshold
