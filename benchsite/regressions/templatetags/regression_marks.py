"""{% chart_marks_table benchmark %}: the table fallback of the verdict and change-point marks
the benchmark page's charts draw (two queries, however long the history); {% sensitivity_table
benchmark %}: what each variant's decode series can see."""
from django import template

from runners import contract

from ..detect import sensitivity
from ..models import ChangePoint, SeriesNoise, Verdict
from ..thresholds import explicit_rows, most_specific

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


@register.inclusion_tag("regressions/_sensitivity.html")
def sensitivity_table(benchmark):
    """Per variant: its decode series' noise between engine starts (the newest kept, SeriesNoise),
    the threshold the rule gives it, and the smallest change seen 19 times in 20 with 2 and 6
    starts (one query)."""
    metric = contract.DECODE_TOK_S
    newest = {}
    for row in (SeriesNoise.objects.filter(benchmark=benchmark, metric=metric, point="")
                .annotate(**explicit_rows(benchmark=benchmark, metric=metric))
                .select_related("variant").order_by("variant__position", "-updated_at", "-id")):
        newest.setdefault(row.variant_id, row)
    rows = []
    for row in newest.values():
        explicit = most_specific(benchmark=benchmark, metric=metric, own=row.own, every=row.every)
        noise = sensitivity.Noise(row.relative, row.starts, row.same_code)
        bound = sensitivity.bound(metric, noise=noise, explicit=explicit)
        rows.append({"variant": row.variant.name, "noise": noise, "bound": bound, "known": noise.known,
                     "visible": {n: sensitivity.visible_change(noise, n, bound.relative) for n in (2, 6)}})
    return {"rows": rows, "min_starts": sensitivity.MIN_STARTS, "k": sensitivity.K,
            "floor": sensitivity.floor(metric), "default": sensitivity.default_threshold(metric)}
