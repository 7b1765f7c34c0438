"""{% run_pull run %}: on the run page, the pull request a run measured a side of (bench's own
code does not know pull requests: it reaches this tag through its template only)."""
from django import template

from ..pulls.models import PullRun
from ..pulls.selectors import pull_page_path

register = template.Library()


@register.inclusion_tag("hooks/_run_pull.html")
def run_pull(run):
    pull_run = PullRun.objects.select_related("comparison__pull__watch").filter(run=run).first()
    if pull_run is None:
        return {"pull_run": None}
    pull = pull_run.comparison.pull
    return {"pull_run": pull_run, "pull": pull, "page": pull_page_path(pull)}
