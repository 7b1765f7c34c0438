"""Number formats the dashboard templates share (the formats themselves: benchsite/bench/domain/units.py)."""
from django import template

from ..domain import units

register = template.Library()


@register.filter
def pct(value, digits=1):
    """0.153 -> '15.3%' (None -> '–')."""
    return units.percent(value, int(digits))


@register.filter
def signed_pct(value, digits=1):
    """0.153 -> '+15.3%', -0.02 -> '−2.0%'."""
    return units.change_text(value, int(digits))


@register.filter
def signed(value, digits=2):
    if value is None:
        return "–"
    return f"{value:+.{int(digits)}f}".replace("-", "\u2212")


@register.filter
def num(value):
    """A measurement for a table: 4 significant digits, whole numbers from 1000 on."""
    return units.number(value)


@register.filter
def metric_label(name):
    """'allreduce_share' -> 'allreduce share of a decode step'."""
    return units.metric_label(name)


@register.filter
def metric_value(value, name):
    """{{ m.value|metric_value:m.metric }} -> '8.5%', '45.2 MB', '289 us', '293.2 tok/s'."""
    return units.metric_text(name, value)


@register.simple_tag
def metric_range(name, low, high):
    """{% metric_range m.metric m.ci_low m.ci_high %} -> '296.9 – 298.9 tok/s'."""
    return units.range_text(name, low, high)


@register.filter
def metric_delta(value, name):
    """A difference of two values of the metric NAME ('+1.2 pp' for shares)."""
    return units.delta_text(name, value)


@register.filter
def time_ms(value):
    """A duration in ms: '289 us', '3.41 ms'."""
    return units.time_text(value)


@register.filter
def interval(bounds):
    """(low, high) of a relative change -> '[−93.3%, −84.8%]'."""
    low, high = bounds if bounds else (None, None)
    return units.interval_text(low, high)


@register.filter
def took_effect(report):
    """A run's took-effect report as the pages show it (benchsite/bench/lifecycle/tookeffect.py)."""
    from ..lifecycle.tookeffect import took_effect_view

    return took_effect_view(report)


@register.filter
def words(key):
    """A stored key as words: 'held_back' -> 'held back'."""
    return str(key).replace("_", " ")
