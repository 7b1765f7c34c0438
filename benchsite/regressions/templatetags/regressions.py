"""{% run_verdicts run %}: the verdict table on the run page (one include, no view change)."""
from django import template

from runners import contract

from ..selectors import run_verdicts as select_run_verdicts

register = template.Library()


@register.inclusion_tag("regressions/_run_verdicts.html")
def run_verdicts(run):
    rows = [{"verdict": v, "label": contract.METRICS[v.metric].label if v.metric in contract.METRICS else v.metric}
            for v in select_run_verdicts(run=run)]
    return {"rows": rows, "run": run}


@register.filter
def signed_percent(value, digits=1):
    """0.0612 -> '+6.1%'; '–' for None."""
    if value is None:
        return "–"
    return f"{value * 100:+.{int(digits)}f}%"
