"""Metric labels and number formats: the one place pages, chart axes, tables, commit statuses and
alerts take them from. Names, units and directions stay in the registry (runners/contract.py);
this module only says how a value reads: shares as %, bytes as MB/GB, times in us or ms.

    metric_label("allreduce_share")             # 'allreduce share of a decode step'
    metric_text("allreduce_share", 0.084778)    # '8.5%'
    metric_text("weight_bytes_per_gpu", 4.5e7)  # '45.0 MB'
    change_text(-0.2)                           # '−20.0%'
    verdict_text("decode_tok_s", -0.918, -0.933, -0.848)  # 'decode throughput −91.8% [−93.3%, −84.8%]'
    chart_display("allreduce_share")            # {'label': ..., 'unit': '%', 'scale': 100} for the JS
"""
from __future__ import annotations

import math

from runners.contract import ALLREDUCE_SHARE, ALLREDUCE_SHARE_ANALYTIC, CORRECT, METRICS

MINUS = "\u2212"
SHARES = frozenset({ALLREDUCE_SHARE, ALLREDUCE_SHARE_ANALYTIC})  # fractions of a decode step
_BYTES = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def metric_label(name: str) -> str:
    """The registry's words for a metric ('decode throughput'); an unknown key as itself."""
    metric = METRICS.get(name)
    return metric.label if metric else name


def _kind(name: str) -> str:
    if name in SHARES:
        return "share"
    if name == CORRECT:
        return "flag"
    unit = METRICS[name].unit if name in METRICS else ""
    return {"ms": "time", "us": "time", "B": "bytes"}.get(unit, "number")


def number(value) -> str:
    """4 significant digits, whole numbers from 1000 on ('–' for None)."""
    if value is None:
        return "–"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def time_text(ms) -> str:
    """A duration in ms: under 1 ms in us ('289 us'), else in ms ('3.41 ms')."""
    if ms is None:
        return "–"
    if abs(ms) < 1:
        return f"{number(ms * 1000)} us"
    return f"{number(ms)} ms"


def bytes_text(value) -> str:
    """Decimal units, as the bandwidth figures (GB/s) are: 4.5168e7 -> '45.2 MB'."""
    if value is None:
        return "–"
    for size, unit in _BYTES:
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}".replace("e+", "e")
    return f"{value:.0f} B"


def percent(fraction, digits: int = 1) -> str:
    """0.084778 -> '8.5%'."""
    if fraction is None:
        return "–"
    return f"{fraction * 100:.{digits}f}%"


def change_text(fraction, digits: int = 1) -> str:
    """A relative change: 0.153 -> '+15.3%', -0.02 -> '−2.0%'."""
    if fraction is None:
        return "–"
    return f"{fraction * 100:+.{digits}f}%".replace("-", MINUS)


def interval_text(low, high, digits: int = 1) -> str:
    """A relative change's interval: '[−93.3%, −84.8%]'."""
    if low is None or high is None:
        return "–"
    return f"[{change_text(low, digits)}, {change_text(high, digits)}]"


def verdict_text(name: str, effect, low=None, high=None) -> str:
    """A judged change as a commit status or an alert says it:
    'decode throughput −91.8% [−93.3%, −84.8%]' (without an interval: the change alone)."""
    text = f"{metric_label(name)} {change_text(effect)}"
    return f"{text} {interval_text(low, high)}" if low is not None and high is not None else text


def metric_text(name: str, value) -> str:
    """A value of a metric with its unit, as a person reads it."""
    if value is None:
        return "–"
    kind = _kind(name)
    if kind == "share":
        return percent(value)
    if kind == "flag":
        return "yes" if value == 1 else "no"
    if kind == "bytes":
        return bytes_text(value)
    if kind == "time":
        return time_text(value / 1000 if METRICS[name].unit == "us" else value)
    unit = METRICS[name].unit if name in METRICS else ""
    return f"{number(value)} {unit}".strip()


def range_text(name: str, low, high) -> str:
    """An interval of values, the unit once: '296.9 – 298.9 tok/s', '8.1% – 9.0%', '250 us – 1.2 ms'."""
    if low is None or high is None:
        return "–"
    if _kind(name) == "number":
        unit = METRICS[name].unit if name in METRICS else ""
        return f"{number(low)} – {number(high)} {unit}".strip()
    return f"{metric_text(name, low)} – {metric_text(name, high)}"


def delta_text(name: str, delta) -> str:
    """A difference of two values of a metric: shares in percentage points ('+1.2 pp')."""
    if delta is None:
        return "–"
    if _kind(name) == "share":
        return f"{delta * 100:+.1f} pp".replace("-", MINUS)
    if _kind(name) == "flag":
        return "same" if delta == 0 else ("became correct" if delta > 0 else "became incorrect")
    text = metric_text(name, abs(delta))
    return ("+" if delta >= 0 else MINUS) + text


def chart_display(name: str) -> dict:
    """What a chart needs to label an axis and its ticks: the label, the unit shown and the
    factor from the stored value to the shown one."""
    kind = _kind(name) if name in METRICS else "number"
    unit = METRICS[name].unit if name in METRICS else ""
    if kind == "share":
        return {"label": metric_label(name), "unit": "%", "scale": 100}
    if kind == "bytes":
        return {"label": metric_label(name), "unit": "MB", "scale": 1e-6}
    return {"label": metric_label(name), "unit": unit, "scale": 1}


def axis_title(name: str) -> str:
    display = chart_display(name)
    return f"{display['label']} ({display['unit']})" if display["unit"] else display["label"]
