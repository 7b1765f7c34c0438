"""The home page's reads: per benchmark and variant the latest tok/s, its change against the
previous commit, the latest verdict and a sparkline; and the runs that are queued or running.
A fixed number of queries however many benchmarks, variants and runs there are."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import F, OuterRef, Subquery, Window
from django.db.models.functions import RowNumber

from runners.contract import CORRECT, DECODE_TOK_S

from .models import Benchmark, Measurement, Run, Variant

SPARK_POINTS = 30  # successful runs per variant in the sparkline
ACTIVE_LIMIT = 200


def _recent_decode_rows() -> dict[int, list[dict]]:
    """Per variant, its newest SPARK_POINTS successful runs' tok/s (newest first) with verdicts."""
    verdict = Measurement.objects.filter(run=OuterRef("run"), metric=CORRECT).values("value")[:1]
    rank = Window(RowNumber(), partition_by=[F("run__variant_id")],
                  order_by=[F("run__created_at").desc(), F("run__id").desc()])
    rows = (
        Measurement.objects.filter(metric=DECODE_TOK_S, run__state=Run.State.SUCCEEDED)
        .annotate(rank=rank, verdict=Subquery(verdict))
        .filter(rank__lte=SPARK_POINTS)
        .order_by("run__variant_id", "rank")
        .values("run_id", "run__variant_id", "run__commit", "run__batch", "run__created_at", "value", "verdict")
    )
    by_variant = defaultdict(list)
    for row in rows:
        by_variant[row["run__variant_id"]].append(row)
    return by_variant


def _summary(rows: list[dict]) -> dict:
    """Latest correct tok/s, the previous commit's, the change, the latest verdict and the sparkline."""
    good = [r for r in rows if r["verdict"] != 0]  # an incorrect run's speed is never the figure
    latest = good[0] if good else None
    previous = None
    if latest:
        key = latest["run__commit"] or latest["run__batch"]
        previous = next((r for r in good if (r["run__commit"] or r["run__batch"]) != key), None)
    change = None
    if latest and previous and previous["value"]:
        change = (latest["value"] - previous["value"]) / previous["value"]
    newest = rows[0] if rows else None
    return {
        "latest": latest, "previous": previous, "change": change,
        "verdict": None if newest is None else newest["verdict"], "verdict_run": newest and newest["run_id"],
        "spark": ",".join(f"{r['value']:.4g}" for r in reversed(good)),
    }


def home_benchmarks() -> list[dict]:
    """[{benchmark, variants: [{variant, latest, previous, change, verdict, spark}], active: [Run]}]."""
    recent = _recent_decode_rows()
    variants = defaultdict(list)
    for variant in Variant.objects.order_by("benchmark_id", "position"):
        variants[variant.benchmark_id].append({"variant": variant, **_summary(recent.get(variant.pk, []))})
    active = defaultdict(list)
    runs = (Run.objects.filter(state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES])
            .select_related("variant").order_by("created_at", "id")[:ACTIVE_LIMIT])
    for run in runs:
        active[run.benchmark_id].append(run)
    return [{"benchmark": b, "variants": variants[b.pk], "active": active[b.pk]}
            for b in Benchmark.objects.order_by("name")]
