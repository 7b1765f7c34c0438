"""Largest-Triangle-Three-Buckets downsampling (Steinarsson 2013) in numpy: a chart series of
any length becomes at most `threshold` points that keep its peaks and dips, so a chart endpoint
stays small without hiding a regression spike."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def lttb_indices(x, y, threshold: int) -> np.ndarray:
    """Indices (ascending) of the points LTTB keeps; every index when len(x) <= threshold.
    x must be ascending. The first and last points are always kept."""
    import numpy as np  # 35 ms: imported where a chart is shaped, not by every process at start

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if threshold >= n or n <= 2:
        return np.arange(n)
    if threshold < 3:
        raise ValueError("threshold must be at least 3")
    # Buckets of the inner points; each picks the point with the largest triangle formed with
    # the previously kept point and the average of the next bucket.
    edges = np.linspace(1, n - 1, threshold - 1).astype(int)
    kept = np.empty(threshold, dtype=int)
    kept[0], kept[-1] = 0, n - 1
    a = 0
    for i in range(threshold - 2):
        lo, hi = edges[i], edges[i + 1]
        nxt_lo, nxt_hi = edges[i + 1], (edges[i + 2] if i + 2 < len(edges) else n)
        avg_x, avg_y = x[nxt_lo:nxt_hi].mean(), y[nxt_lo:nxt_hi].mean()
        bx, by = x[lo:hi], y[lo:hi]
        area = np.abs((x[a] - avg_x) * (by - y[a]) - (x[a] - bx) * (avg_y - y[a]))
        a = lo + int(area.argmax())
        kept[i + 1] = a
    return kept
