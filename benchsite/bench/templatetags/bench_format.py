"""Number formats the dashboard templates share."""
from django import template

register = template.Library()


@register.filter
def pct(value, digits=1):
    """0.153 -> '15.3%' (None -> '–')."""
    if value is None:
        return "–"
    return f"{value * 100:.{int(digits)}f}%"


@register.filter
def signed_pct(value, digits=1):
    """0.153 -> '+15.3%', -0.02 -> '−2.0%'."""
    if value is None:
        return "–"
    return f"{value * 100:+.{int(digits)}f}%".replace("-", "\u2212")


@register.filter
def signed(value, digits=2):
    if value is None:
        return "–"
    return f"{value:+.{int(digits)}f}".replace("-", "\u2212")


@register.filter
def num(value):
    """A measurement for a table: 4 significant digits, whole numbers from 1000 on."""
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
