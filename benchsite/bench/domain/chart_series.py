"""A benchmark's history of one metric for its charts: one series per variant, the main line's
commits in first-parent order on x (bench.domain.branches), error bars from confidence intervals, runs
judged incorrect and runs of other branches apart from the line, the benchmark's annotations
placed on the same x axis, and at most MAX_POINTS points per series."""
from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from datetime import timezone as dt_timezone

from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import CharField, Count, FilteredRelation, Max, Q, Subquery
from django.db.models.functions import Cast

from runners.contract import (ALLREDUCE_SHARE, ALLREDUCE_US_PER_CALL, CORRECT, DECODE_TOK_S, ITL_MS_P99, METRICS,
                              TTFT_MS)

from .branches import first_parent_order, main_line
from .downsample import lttb_indices
from .units import chart_display
from ..models import Benchmark, Measurement, Run

# The timelines of a benchmark page, in this order; any registry metric can be asked for.
HISTORY_METRICS = (DECODE_TOK_S, TTFT_MS, ITL_MS_P99, ALLREDUCE_SHARE, ALLREDUCE_US_PER_CALL)
TP_METRICS = (ALLREDUCE_SHARE, ALLREDUCE_US_PER_CALL)  # one GPU makes no allreduce: nothing to chart
MAX_POINTS = 1000  # a chart's width in pixels, about: at 5 series the JSON stays under 300 KB gzip-compressed


def _rows(benchmark: Benchmark, metric: str, point: str = "") -> list[tuple]:
    """(run, variant, batch, created, commit, value, ci_low, ci_high, ref, build path, verdict,
    branch, parent commit, first-parent depth) of every successful run's measurement, oldest
    first; verdict is 1.0, 0.0 or None (not judged)."""
    # The verdict by a join on the (run, metric) unique index: a subquery per row cost more than
    # the rest of the query. Batch and date as text: converting 10,000 of them to UUID and
    # datetime costs more than the query; only the axis's ticks need them (`_tick`).
    measurements = Measurement.all_points.filter(point=point) if point else Measurement.objects.all()
    return list(
        measurements.filter(run__benchmark=benchmark, run__state=Run.State.SUCCEEDED, metric=metric)
        .exclude(run__trigger=Run.Trigger.PULL)  # a pull request's runs are on its own page
        .annotate(judged=FilteredRelation("run__measurements", condition=Q(run__measurements__metric=CORRECT)),
                  batch_text=Cast("run__batch", CharField()), created_text=Cast("run__created_at", CharField()))
        .order_by("run__created_at", "run__id")
        .values_list("run_id", "run__variant_id", "batch_text", "created_text", "run__commit",
                     "value", "ci_low", "ci_high", "run__ref", "run__build__path", "judged__value",
                     "run__branch", "run__build__parent_commit", "run__build__first_parent_depth")
    )


_BRANCH = 11  # a row's branch (see _rows)


def _when(text: str) -> datetime:
    """A date cast to text by SQLite ('2026-01-01 00:00:00', UTC) or PostgreSQL (with offset)."""
    when = datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt_timezone.utc)


def _x_positions(rows) -> tuple[dict, list[tuple]]:
    """One x position per commit of the line, in first-parent order (commits recorded without
    their depth where they first ran); runs of the installed engine (no commit) get one position
    per trigger batch. The axis keeps (commit, batch, date) text."""
    first, depths = {}, {}
    for _run, _variant, batch, created, commit, *_rest, depth in rows:
        first.setdefault(commit or batch, (commit, batch, created))
        if commit and depth is not None:
            depths[commit] = depth
    axis = [first[key] for key in first_parent_order(list(first), depths)]
    return {commit or batch: x for x, (commit, batch, _created) in enumerate(axis)}, axis


def _apart_x(rows, index: dict, line_name: str) -> dict[int, int]:
    """Where each run off the line is drawn (run id -> x): at its parent commit when the line has
    it, else at the newest commit of the line that had run before it."""
    placed, newest = {}, 0
    for run, _variant, batch, _created, commit, *_values, branch, parent, _depth in rows:
        if not line_name or branch == line_name:
            newest = max(newest, index[commit or batch])
        else:
            placed[run] = index.get(parent, newest) if parent else newest
    return placed


def _tick(entry: tuple) -> dict:
    commit, batch, created = entry
    return {"commit": commit, "batch": str(uuid.UUID(batch)), "t": _when(created).isoformat()}


def placed_annotations(annotations, axis: list[tuple]) -> list[dict]:
    """Each annotation with the x range it covers (None when its commit or dates are not on the axis)."""
    placed, dates = [], None
    for a in annotations:
        if a.commit:
            xs = [x for x, (commit, _b, _t) in enumerate(axis) if commit.startswith(a.commit)]
        else:
            dates = dates or [_when(created) for _c, _b, created in axis]  # parsed only for date notes
            xs = [x for x, when in enumerate(dates) if a.starts_at and when >= a.starts_at
                  and (a.ends_at is None or when <= a.ends_at)]
        placed.append({"id": a.pk, "text": a.text, "commit": a.commit,
                       "starts_at": a.starts_at.isoformat() if a.starts_at else None,
                       "ends_at": a.ends_at.isoformat() if a.ends_at else None,
                       "x_from": xs[0] if xs else None, "x_to": xs[-1] if xs else None})
    return placed


def _downsample(points: list[tuple], max_points: int) -> list[tuple]:
    if len(points) <= max_points:
        return points
    kept = lttb_indices([p[1] for p in points], [p[2] for p in points], max_points)
    return [points[i] for i in kept]


def _figure(value: float | None) -> float | None:
    """Six significant digits: more than a chart or its tooltip shows, a third fewer bytes."""
    return None if value is None else float(f"{value:.6g}")


def _point(p: tuple) -> dict:
    run, x, y, lo, hi, ref, build_path = p[:7]
    # what actually ran: the requested ref and the build path (installed / overlay / source)
    return {"run": run, "x": x, "y": _figure(y), "lo": _figure(lo), "hi": _figure(hi), "ref": ref,
            "build": build_path or "installed"}


def _apart_point(p: tuple) -> dict:
    """A run off the line: its own commit and branch (its x is where it is drawn, not its commit)."""
    *_, commit, branch, incorrect = p
    return {**_point(p), "commit": commit, "branch": branch, "incorrect": incorrect}


def chart_series(benchmark: Benchmark, metric: str, max_points: int, variants: list[dict], point: str = "") -> dict:
    """The chart's per-variant points and the axis: everything but the annotations."""
    rows, line_name = _rows(benchmark, metric, point), main_line(benchmark)
    line_rows = [r for r in rows if not line_name or r[_BRANCH] == line_name]
    apart_rows = [r for r in rows if line_name and r[_BRANCH] != line_name]
    index, axis = _x_positions(line_rows)
    apart_x = _apart_x(rows, index, line_name)
    line = {v["id"]: [] for v in variants}
    incorrect = {v["id"]: [] for v in variants}
    apart = {v["id"]: [] for v in variants}
    for run, variant, batch, _created, commit, value, lo, hi, ref, build_path, verdict, *_ in line_rows:
        point = (run, index[commit or batch], value, lo, hi, ref, build_path)
        (incorrect if verdict == 0 else line).setdefault(variant, []).append(point)
    for run, variant, _batch, _created, commit, value, lo, hi, ref, build_path, verdict, branch, *_ in apart_rows:
        point = (run, apart_x[run], value, lo, hi, ref, build_path, commit, branch, verdict == 0)
        apart.setdefault(variant, []).append(point)
    series, used = [], set()
    for v in variants:
        kept, bad = _downsample(line[v["id"]], max_points), _downsample(incorrect[v["id"]], max_points)
        other = _downsample(sorted(apart[v["id"]], key=lambda p: p[1]), max_points)
        for points in (kept, bad, other):
            used.update(p[1] for p in points)
        series.append({**v, "points": [_point(p) for p in kept], "incorrect": [_point(p) for p in bad],
                       "off_line": [_apart_point(p) for p in other],
                       "total": len(line[v["id"]]) + len(incorrect[v["id"]]) + len(apart[v["id"]])})
    ticks = {x: _tick(axis[x]) for x in sorted(used) if x < len(axis)}  # none for rings beside an empty line
    return {"main_line": line_name, "x_count": len(axis), "axis": ticks, "variants": series, "full_axis": axis}


def chart_head(benchmark: Benchmark, metric: str, point: str = "") -> dict:
    """The chart's header: what it shows and how its values read."""
    info = METRICS[metric]
    return {"benchmark": benchmark.slug, "metric": metric, "point": point or benchmark.default_point,
            "label": info.label, "unit": info.unit,
            "direction": info.direction, "display": chart_display(metric)}


def chart_variants(benchmark: Benchmark) -> list[dict]:
    """The benchmark's variants in page order: id, name, position."""
    return list(benchmark.variants.order_by("position").values("id", "name", "position"))


def benchmark_history(*, benchmark: Benchmark, metric: str, max_points: int = MAX_POINTS, point: str = "") -> dict:
    """The chart JSON of one metric. Points: {run, x, y, lo, hi, ref, build} on the line,
    incorrect runs in their variant's `incorrect` list; `axis` maps the x positions the points
    use to their commit, batch and first date. POINT: a workload point's id ("" the first)."""
    series = chart_series(benchmark, metric, max_points, chart_variants(benchmark), point)
    full_axis = series.pop("full_axis")
    return {**chart_head(benchmark, metric, point), **series,
            "annotations": placed_annotations(benchmark.annotations.all(), full_axis)}


CACHE_TTL_S = 600  # bounds how long an edit the version below cannot see (a deleted measurement) shows


def _data_version(benchmark: Benchmark) -> tuple:
    """What the series depend on, in one indexed query: the benchmark's run count and newest run
    id (runs added or deleted) and the newest measurement write anywhere (results stored, a
    verdict re-judged in place: Measurement.updated_at)."""
    newest_write = Measurement.objects.order_by("-updated_at").values("updated_at")[:1]
    row = (Benchmark.objects.filter(pk=benchmark.pk)
           .values("pk").annotate(run_count=Count("runs"), last_run=Max("runs__id"), written=Subquery(newest_write))
           .values_list("run_count", "last_run", "written").get())
    return row


def benchmark_history_json(*, benchmark: Benchmark, metric: str, max_points: int = MAX_POINTS,
                           point: str = "") -> bytes:
    """benchmark_history as JSON bytes, its series cached per data version (10,000 runs take
    ~100 ms of CPU to read, shape and encode; a cached chart ~15 ms). One cache entry per chart,
    holding its version: a new version replaces the old entry instead of piling up beside it.
    Variant names and annotations are read on every request: renames and new notes show at once."""
    variants = chart_variants(benchmark)
    shape = (_data_version(benchmark), [tuple(v.values()) for v in variants], main_line(benchmark))
    version = hashlib.sha256(repr(shape).encode()).hexdigest()
    key = f"bench:chart:{benchmark.pk}:{metric}:{max_points}" + (f":{point}" if point else "")
    cached = cache.get(key)
    if cached is None or cached[0] != version:
        series = chart_series(benchmark, metric, max_points, variants, point)
        full_axis = series.pop("full_axis")
        cached = (version, full_axis, json.dumps(series, cls=DjangoJSONEncoder)[1:-1])  # the object's members
        cache.set(key, cached, CACHE_TTL_S)
    _, full_axis, members = cached
    rest = {**chart_head(benchmark, metric, point),
            "annotations": placed_annotations(benchmark.annotations.all(), full_axis)}
    return ("{" + members + "," + json.dumps(rest, cls=DjangoJSONEncoder)[1:]).encode()
