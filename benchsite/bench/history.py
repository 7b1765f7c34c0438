"""A benchmark's history of one metric for its charts: one series per variant, commits in order
on x, error bars from confidence intervals, runs judged incorrect apart from the line, the
benchmark's annotations placed on the same x axis, and at most MAX_POINTS points per series."""
from __future__ import annotations

import uuid
from datetime import datetime
from datetime import timezone as dt_timezone

from django.db.models import CharField, OuterRef, Subquery
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runners.contract import (ALLREDUCE_SHARE, ALLREDUCE_US_PER_CALL, CORRECT, DECODE_TOK_S, ITL_MS_P99, METRICS,
                              TTFT_MS)

from .downsample import lttb_indices
from .models import Benchmark, Measurement, Run

# The timelines of a benchmark page, in this order; any registry metric can be asked for.
HISTORY_METRICS = (DECODE_TOK_S, TTFT_MS, ITL_MS_P99, ALLREDUCE_SHARE, ALLREDUCE_US_PER_CALL)
MAX_POINTS = 2000


class BadChartQuery(ValueError):
    """A chart query parameter is unknown or malformed (the message says which and why)."""


def chart_metric(raw: str | None) -> str:
    metric = DECODE_TOK_S if raw is None else raw
    if metric not in METRICS:
        raise BadChartQuery(f"unknown metric {metric!r}; known: {', '.join(sorted(METRICS))}")
    return metric


def chart_max_points(raw: str | None) -> int:
    if raw in (None, ""):
        return MAX_POINTS
    if not raw.isdigit() or not 3 <= int(raw) <= MAX_POINTS:
        raise BadChartQuery(f"max_points must be a whole number from 3 to {MAX_POINTS}, not {raw!r}")
    return int(raw)


def _rows(benchmark: Benchmark, metric: str) -> list[tuple]:
    """(run, variant, batch, created, commit, value, ci_low, ci_high, correct, ref, build path)
    of every successful run's measurement, oldest first; correct is 1.0, 0.0 or None (not judged)."""
    verdict = Measurement.objects.filter(run=OuterRef("run"), metric=CORRECT).values("value")[:1]
    # Batch and date as text: converting 10,000 of them to UUID and datetime costs more than the
    # query; only the axis's few need a date (`_when`).
    return list(
        Measurement.objects.filter(run__benchmark=benchmark, run__state=Run.State.SUCCEEDED, metric=metric)
        .annotate(verdict=Subquery(verdict), batch_text=Cast("run__batch", CharField()),
                  created_text=Cast("run__created_at", CharField()))
        .order_by("run__created_at", "run__id")
        .values_list("run_id", "run__variant_id", "batch_text", "created_text", "run__commit",
                     "value", "ci_low", "ci_high", "verdict", "run__ref", "run__build__path")
    )


def _when(text: str) -> datetime:
    when = parse_datetime(text.replace(" ", "T", 1))
    return when if timezone.is_aware(when) else timezone.make_aware(when, dt_timezone.utc)


def _x_positions(rows) -> tuple[dict, list[dict]]:
    """One x position per commit, in the order commits first ran; runs of the installed engine
    (no commit) get one position per trigger batch."""
    index, axis = {}, []
    for _run, _variant, batch, created, commit, *_ in rows:
        key = commit or f"batch:{batch}"
        if key not in index:
            index[key] = len(axis)
            when = _when(created)
            axis.append({"commit": commit, "batch": str(uuid.UUID(batch)), "t": when.isoformat(), "dt": when})
    return index, axis


def _place_annotations(annotations, axis: list[dict]) -> list[dict]:
    """Each annotation with the x range it covers (None when its commit or dates are not on the axis)."""
    placed = []
    for a in annotations:
        xs = []
        for x, tick in enumerate(axis):
            if a.commit and tick["commit"].startswith(a.commit):
                xs.append(x)
            elif not a.commit and a.starts_at and tick["dt"] >= a.starts_at and (
                    a.ends_at is None or tick["dt"] <= a.ends_at):
                xs.append(x)
        placed.append({"id": a.pk, "text": a.text, "commit": a.commit,
                       "starts_at": a.starts_at.isoformat() if a.starts_at else None,
                       "ends_at": a.ends_at.isoformat() if a.ends_at else None,
                       "x_from": xs[0] if xs else None, "x_to": xs[-1] if xs else None})
    return placed


def _downsample(points: list[dict], max_points: int) -> list[dict]:
    if len(points) <= max_points:
        return points
    kept = lttb_indices([p["x"] for p in points], [p["y"] for p in points], max_points)
    return [points[i] for i in kept]


def benchmark_history(*, benchmark: Benchmark, metric: str, max_points: int = MAX_POINTS) -> dict:
    """The chart JSON of one metric. Points: {run, x, y, lo, hi} on the line, incorrect runs in
    their variant's `incorrect` list; `axis` maps the x positions the points use to their
    commit and first date."""
    info = METRICS[metric]
    variants = list(benchmark.variants.order_by("position").values("id", "name", "position"))
    rows = _rows(benchmark, metric)
    index, axis = _x_positions(rows)
    line = {v["id"]: [] for v in variants}
    incorrect = {v["id"]: [] for v in variants}
    for run, variant, batch, _created, commit, value, lo, hi, verdict, ref, build_path in rows:
        # what actually ran: the requested ref and the build path (installed / overlay / source)
        point = {"run": run, "x": index[commit or f"batch:{batch}"], "y": value, "lo": lo, "hi": hi,
                 "ref": ref, "build": build_path or "installed"}
        (incorrect if verdict == 0 else line).setdefault(variant, []).append(point)
    series, used = [], set()
    for v in variants:
        kept, bad = _downsample(line[v["id"]], max_points), _downsample(incorrect[v["id"]], max_points)
        used.update(p["x"] for p in kept)
        used.update(p["x"] for p in bad)
        series.append({**v, "points": kept, "incorrect": bad, "total": len(line[v["id"]]) + len(incorrect[v["id"]])})
    return {
        "benchmark": benchmark.slug, "metric": metric, "label": info.label, "unit": info.unit,
        "direction": info.direction, "x_count": len(axis),
        "axis": {x: {k: v for k, v in axis[x].items() if k != "dt"} for x in sorted(used)},
        "variants": series,
        "annotations": _place_annotations(benchmark.annotations.all(), axis),
    }


FALLBACK_RUNS = 60  # newest successful runs in each chart's table fallback


def history_tables(*, benchmark: Benchmark, metrics=HISTORY_METRICS) -> list[dict]:
    """Each chart's table fallback: per metric, its values in the benchmark's newest
    FALLBACK_RUNS successful runs (one query for all metrics, newest runs found by index)."""
    newest = (Run.objects.filter(benchmark=benchmark, state=Run.State.SUCCEEDED)
              .order_by("-created_at", "-id").values("id")[:FALLBACK_RUNS])
    verdict = Measurement.objects.filter(run=OuterRef("run"), metric=CORRECT).values("value")[:1]
    rows = (Measurement.objects.filter(run_id__in=Subquery(newest), metric__in=metrics)
            .annotate(verdict=Subquery(verdict))
            .order_by("-run__created_at", "-run_id")
            .values("metric", "run_id", "run__variant__name", "run__variant__position", "run__commit",
                    "run__created_at", "value", "ci_low", "ci_high", "verdict"))
    tables = {m: [] for m in metrics}
    for row in rows:
        tables[row["metric"]].append(row)
    return [{"metric": m, "info": METRICS[m], "rows": tables[m]} for m in metrics]
