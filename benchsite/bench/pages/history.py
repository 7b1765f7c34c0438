"""The benchmark page's charts as a request asks for them (metric, point, width) and each chart's
table fallback; the series themselves are bench.domain.chart_series'."""
from __future__ import annotations

from django.db.models import Subquery
from django.utils import timezone

from runners.contract import CORRECT, DECODE_TOK_S, METRICS

from ..domain.branches import main_line
from ..domain.chart_series import HISTORY_METRICS, MAX_POINTS, TP_METRICS
from ..domain.units import chart_display, metric_text, range_text
from ..models import Benchmark, Measurement, Run


class BadChartQuery(ValueError):
    """A chart query parameter is unknown or malformed (the message says which and why)."""


def chart_metric(raw: str | None) -> str:
    metric = DECODE_TOK_S if raw is None else raw
    if metric not in METRICS:
        raise BadChartQuery(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
    return metric


def chart_point(benchmark: Benchmark, raw: str | None) -> str:
    """The workload point a chart shows: "" for the benchmark's first point (each run's figure as
    before workload points), else one of its points' ids."""
    if raw in (None, "") or raw == benchmark.default_point:
        return ""
    ids = [p.id for p in benchmark.points]
    if raw not in ids:
        raise BadChartQuery(f"unknown point {raw!r}; this benchmark's points: {', '.join(ids)}")
    return raw


def chart_max_points(raw: str | None) -> int:
    if raw in (None, ""):
        return MAX_POINTS
    if not raw.isdigit() or not 3 <= int(raw) <= MAX_POINTS:
        raise BadChartQuery(f"max_points must be a whole number from 3 to {MAX_POINTS}, not {raw!r}")
    return int(raw)


FALLBACK_RUNS = 60  # newest successful runs in each chart's table fallback


def _table_row(row: dict, verdict: float | None, line_name: str) -> dict:
    """A fallback table row with its cells formatted here: 60 rows x 5 tables through template
    filters cost more than the page's queries."""
    when = timezone.localtime(row["run__created_at"])
    metric = row["metric"]
    ci = range_text(metric, row["ci_low"], row["ci_high"]) if row["ci_low"] is not None else ""
    return {"run_id": row["run_id"], "variant": f"{row['run__variant__position']}. {row['run__variant__name']}",
            "commit": row["run__commit"][:10], "iso": when.isoformat(), "when": when.strftime("%Y-%m-%d %H:%M"),
            "value": metric_text(metric, row["value"]), "ci": ci, "verdict": verdict,
            "off_line": bool(line_name) and row["run__branch"] != line_name, "branch": row["run__branch"]}


def page_metrics(benchmark: Benchmark) -> tuple[str, ...]:
    """The timelines the benchmark's page charts: the allreduce ones only above TP=1."""
    if benchmark.tensor_parallel_size > 1:
        return HISTORY_METRICS
    return tuple(m for m in HISTORY_METRICS if m not in TP_METRICS)


def history_tables(*, benchmark: Benchmark, metrics=HISTORY_METRICS) -> list[dict]:
    """Each chart's table fallback: per metric, its values in the benchmark's newest
    FALLBACK_RUNS successful runs (one query for all metrics and verdicts, newest runs found by index)."""
    newest = (Run.objects.filter(benchmark=benchmark, state=Run.State.SUCCEEDED).exclude(trigger=Run.Trigger.PULL)
              .order_by("-created_at", "-id").values("id")[:FALLBACK_RUNS])
    rows = list(Measurement.objects.filter(run_id__in=Subquery(newest), metric__in=[*metrics, CORRECT])
                .order_by("-run__created_at", "-run_id")
                .values("metric", "run_id", "run__variant__name", "run__variant__position", "run__commit",
                        "run__created_at", "run__branch", "value", "ci_low", "ci_high"))
    verdicts = {row["run_id"]: row["value"] for row in rows if row["metric"] == CORRECT}
    tables, line_name = {m: [] for m in metrics}, main_line(benchmark)
    for row in rows:
        if row["metric"] in tables:
            tables[row["metric"]].append(_table_row(row, verdicts.get(row["run_id"]), line_name))
    return [{"metric": m, "info": METRICS[m], "display": chart_display(m), "rows": tables[m]} for m in metrics]
