"""Charts served from rolled-up series (SeriesRollup): each chart's series at MAX_POINTS is built
from the raw tables when its data changes, not when it is read, so a chart request reads one row
whatever the benchmark's history holds.

- A write that changes a chart (a measurement stored or re-judged, a run succeeded or deleted, a
  variant changed) marks its benchmark's rollups stale and, once committed, rebuilds them
  (bench.domain.rollup_triggers).
- A request that finds its rollup missing, stale or built for other variants or another main line
  rebuilds it first, so a chart is never older than its data; except while a write's rebuild of
  it runs (at most REBUILD_GRACE_S): then the previous series is served, so that readers do not
  pay for the rebuild too.
- A bulk write that sends no signals (bulk_create, a restore) is found by the raw data's version:
  `manage.py bench_rollup` rebuilds the series whose version moved.
A rebuild stores its result only if no write marked the rollup stale meanwhile (`generation`)."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from . import chart_series as history
from .branches import main_line
from ..models import Benchmark, Run, SeriesRollup

log = logging.getLogger(__name__)

# How long readers are served the previous series while a write's rebuild runs (seconds at
# 50,000 runs); past it a reader rebuilds the series itself (a rebuild that died).
REBUILD_GRACE_S = 30


def _digest(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()


def chart_shape(benchmark: Benchmark, variants: list[dict]) -> str:
    """What a series is laid out for besides the data: the variants (names included) and the main line."""
    return _digest(([tuple(v.values()) for v in variants], main_line(benchmark)))


def source_version(benchmark: Benchmark) -> str:
    """The raw data's version for BENCHMARK's series, in one query: its runs (count, newest, how many
    succeeded) and its newest measurement write. bench_rollup compares it to find bulk writes."""
    row = Run.objects.filter(benchmark=benchmark).aggregate(
        runs=Count("id", distinct=True), last=Max("id"),
        succeeded=Count("id", distinct=True, filter=Q(state=Run.State.SUCCEEDED)),
        written=Max("measurements__updated_at"))
    return _digest(tuple(sorted(row.items())))


def default_charts(benchmark: Benchmark) -> list[tuple[str, str]]:
    """The (metric, point) series kept up to date for every benchmark: its page's timelines at its
    first point. Series of other metrics or points are kept once a chart has asked for them."""
    return [(metric, "") for metric in history.HISTORY_METRICS]


def _build(benchmark: Benchmark, metric: str, point: str, variants: list[dict]) -> tuple[str, str]:
    series = history.chart_series(benchmark, metric, history.MAX_POINTS, variants, point)
    full_axis = series.pop("full_axis")
    return json.dumps(series, cls=DjangoJSONEncoder)[1:-1], json.dumps(full_axis)


_UNREAD = object()


def rebuild(benchmark: Benchmark, metric: str, point: str, *, variants: list[dict] | None = None,
            source: str | None = None, generation=_UNREAD) -> SeriesRollup:
    """Build one series from the raw tables and store it (unless a write came meanwhile: then the
    row stays stale for that write's own rebuild). GENERATION: the row's as the caller read it
    (None: no row yet). Four queries whether the row exists or not. Returns the rollup as built."""
    variants = history.chart_variants(benchmark) if variants is None else variants
    if generation is _UNREAD:
        generation = (SeriesRollup.objects.filter(benchmark=benchmark, metric=metric, point=point)
                      .values_list("generation", flat=True).first())
    source = source_version(benchmark) if source is None else source
    members, full_axis = _build(benchmark, metric, point, variants)
    built = SeriesRollup(benchmark=benchmark, metric=metric, point=point, shape=chart_shape(benchmark, variants),
                         source=source, stale=False, members=members, full_axis=full_axis, built_at=timezone.now())
    fields = {f: getattr(built, f) for f in ("shape", "source", "stale", "members", "full_axis", "built_at",
                                             "rebuilding_since")}
    if generation is None:  # another rebuild that created it first read data as new as ours
        SeriesRollup.objects.bulk_create([built], ignore_conflicts=True)
    else:
        SeriesRollup.objects.filter(benchmark=benchmark, metric=metric, point=point,
                                    generation=generation).update(**fields)
    return built


def mark_stale(benchmark_id: int) -> int:
    """Mark BENCHMARK_ID's series stale (one indexed UPDATE); returns how many."""
    return SeriesRollup.objects.filter(benchmark_id=benchmark_id).update(stale=True, generation=F("generation") + 1)


@dataclass
class RefreshReport:
    """What a refresh did, per benchmark slug: series rebuilt and series already up to date."""
    rebuilt: dict[str, list[str]] = field(default_factory=dict)
    current: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        for slug in sorted(set(self.rebuilt) | set(self.current)):
            names = self.rebuilt.get(slug, [])
            out.append(f"{slug}: {len(names)} series rebuilt" + (f" ({', '.join(names)})" if names else "")
                       + f", {self.current.get(slug, 0)} up to date")
        return out


def refresh_benchmark(benchmark: Benchmark, *, rebuild_all: bool = False, report: RefreshReport | None = None,
                      ) -> RefreshReport:
    """Bring BENCHMARK's series up to date: rebuild those stale, missing, laid out for other variants
    or built from another version of the raw data (every one with REBUILD_ALL)."""
    report = report or RefreshReport()
    variants, source = history.chart_variants(benchmark), source_version(benchmark)
    shape = chart_shape(benchmark, variants)
    kept = {(r.metric, r.point): r for r in SeriesRollup.objects.filter(benchmark=benchmark)
            .only("metric", "point", "stale", "shape", "source")}
    rebuilt, current = report.rebuilt.setdefault(benchmark.slug, []), 0
    for metric, point in sorted(set(kept) | set(default_charts(benchmark))):
        row = kept.get((metric, point))
        if not rebuild_all and row and not row.stale and row.shape == shape and row.source == source:
            current += 1
            continue
        rebuild(benchmark, metric, point, variants=variants, source=source)
        rebuilt.append(f"{metric}@{point}" if point else metric)
    report.current[benchmark.slug] = report.current.get(benchmark.slug, 0) + current
    return report


def refresh_after_write(benchmark_id: int) -> None:
    """A committed write's rebuild of its benchmark's stale series. A failure leaves them stale (the
    next request or bench_rollup rebuilds them) and never fails the write that already committed."""
    try:
        benchmark = Benchmark.objects.select_related("engine_source").filter(pk=benchmark_id).first()
        if benchmark is None:
            return
        stale = list(SeriesRollup.objects.filter(benchmark=benchmark, stale=True).values_list("metric", "point"))
        if not stale:  # an earlier write of the same transaction rebuilt them
            return
        SeriesRollup.objects.filter(benchmark=benchmark, stale=True).update(rebuilding_since=timezone.now())
        variants, source = history.chart_variants(benchmark), source_version(benchmark)
        for metric, point in stale:
            rebuild(benchmark, metric, point, variants=variants, source=source)
    except Exception:  # noqa: BLE001 - logged; the series stay stale and are rebuilt on the next read
        log.exception("rebuilding the chart series of benchmark %s failed; they stay stale", benchmark_id)


def _rebuilding(row: dict) -> bool:
    since = row["rebuilding_since"]
    return since is not None and (timezone.now() - since).total_seconds() < REBUILD_GRACE_S


def chart_json(*, benchmark: Benchmark, metric: str, max_points: int = history.MAX_POINTS, point: str = "") -> bytes:
    """The chart JSON (as history.benchmark_history) from its rollup: three queries (variants,
    rollup, annotations) when it is current, three more when it is rebuilt first. Other max_points are shaped from the raw tables."""
    if max_points != history.MAX_POINTS:
        return history.benchmark_history_json(benchmark=benchmark, metric=metric, max_points=max_points, point=point)
    variants = history.chart_variants(benchmark)
    row = (SeriesRollup.objects.filter(benchmark=benchmark, metric=metric, point=point)
           .values("stale", "shape", "generation", "members", "full_axis", "rebuilding_since").first())
    if row is None or row["shape"] != chart_shape(benchmark, variants) or (row["stale"] and not _rebuilding(row)):
        built = rebuild(benchmark, metric, point, variants=variants, generation=None if row is None else row["generation"])
        row = {"members": built.members, "full_axis": built.full_axis}
    annotations = list(benchmark.annotations.all())
    full_axis = [tuple(entry) for entry in json.loads(row["full_axis"])] if annotations else []
    rest = {**history.chart_head(benchmark, metric, point),
            "annotations": history.placed_annotations(annotations, full_axis)}
    return ("{" + row["members"] + "," + json.dumps(rest, cls=DjangoJSONEncoder)[1:]).encode()
