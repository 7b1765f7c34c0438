"""{% chart_marks_table benchmark %}: the table fallback of the verdict and change-point marks
the benchmark page's charts draw (two queries, however long the history)."""
from django import template

from runners import contract

from ..models import ChangePoint, Verdict

register = template.Library()

MARKS_LIMIT = 40  # newest of each kind


@register.inclusion_tag("regressions/_chart_marks.html")
def chart_marks_table(benchmark):
    label = {m: info.label for m, info in contract.METRICS.items()}
    verdicts = (Verdict.objects.filter(run__benchmark=benchmark, kind__in=[Verdict.Kind.IMPROVEMENT, Verdict.Kind.REGRESSION])
                .order_by("-run__created_at", "-run_id")
                .values("run_id", "metric", "kind", "effect", "run__commit", "run__variant__name")[:MARKS_LIMIT])
    changes = (ChangePoint.objects.filter(benchmark=benchmark).order_by("-run__created_at", "-id")
               .values("id", "run_id", "metric", "change", "status", "is_regression", "commit", "variant__name")[:MARKS_LIMIT])
    rows = [{"run": v["run_id"], "metric": label.get(v["metric"], v["metric"]), "variant": v["run__variant__name"],
             "commit": v["run__commit"][:10], "mark": v["kind"], "effect": v["effect"], "status": ""} for v in verdicts]
    rows += [{"run": c["run_id"], "metric": label.get(c["metric"], c["metric"]), "variant": c["variant__name"],
              "commit": c["commit"][:10], "mark": "change point", "effect": c["change"], "status": c["status"]}
             for c in changes]
    return {"benchmark": benchmark, "rows": rows}
