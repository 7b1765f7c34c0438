"""The home page's reads: per benchmark and variant the latest tok/s on its main line, its change
against the previous commit, the latest verdict and a sparkline; and the runs that are queued or running.
A fixed number of queries however many benchmarks, variants and runs there are: two when every
benchmark's summaries are cached (home_cache: the benchmarks with their versions, the active runs),
four when any is recomputed (its variants and their rows besides)."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import Exists, F, FilteredRelation, OuterRef, Q, Subquery

from runners.contract import CORRECT, DECODE_TOK_S

from ..domain import home_cache
from ..domain.branches import main_line
from ..models import Benchmark, Measurement, Run, Variant

SPARK_POINTS = 30  # successful runs per variant in the sparkline
ACTIVE_LIMIT = 200


def _variants_with_cutoff():
    """Every variant in benchmark and position order, with the date of its SPARK_POINTS-th newest
    successful run with a decode figure (None when it has fewer): found by the (variant,
    created_at) index, a few rows each."""
    has_decode = Measurement.objects.filter(run=OuterRef("pk"), metric=DECODE_TOK_S)
    nth = (Run.objects.filter(variant=OuterRef("pk"), state=Run.State.SUCCEEDED).exclude(trigger=Run.Trigger.PULL)
           .filter(Exists(has_decode))
           .order_by("-created_at", "-id").values("created_at")[SPARK_POINTS - 1:SPARK_POINTS])
    return Variant.objects.order_by("benchmark_id", "position").annotate(cutoff=Subquery(nth))


# Variants per query: SQLite parses an OR chain as a tree as deep as its terms (1,000 at most).
VARIANTS_PER_QUERY = 150


def _correctness() -> FilteredRelation:
    """The run's correctness verdict beside its tok/s (a new one per query: Django binds it to one)."""
    return FilteredRelation("run__measurements", condition=Q(run__measurements__metric=CORRECT,
                                                             run__measurements__first_point=True))


def _recent_decode_rows(variants) -> dict[int, list[dict]]:
    """Per variant, its newest SPARK_POINTS successful runs' tok/s (newest first), each with its
    correctness verdict joined in: each variant's runs from its cutoff on, one query per
    VARIANTS_PER_QUERY variants (a window over every run cost 0.2 s at 10,000 runs)."""
    by_variant = defaultdict(list)
    for i in range(0, len(variants), VARIANTS_PER_QUERY):
        since = Q()
        for v in variants[i:i + VARIANTS_PER_QUERY]:
            since |= Q(run__variant_id=v.pk, **({"run__created_at__gte": v.cutoff} if v.cutoff else {}))
        rows = (Measurement.objects.filter(since, metric=DECODE_TOK_S, run__state=Run.State.SUCCEEDED)
                .exclude(run__trigger=Run.Trigger.PULL).annotate(correct=_correctness())
                .order_by("-run__created_at", "-run_id")
                # no run__created_at: Django's timestamptz loader is pure Python, 6 us a value
                # (40 ms of the page's CPU for 100 variants' 6,000 rows)
                .values("run_id", "run__variant_id", "run__commit", "run__batch", "run__outcome",
                        "run__outcome_final", "run__branch", "value", verdict=F("correct__value")))
        for row in rows:
            if len(by_variant[row["run__variant_id"]]) < SPARK_POINTS:
                by_variant[row["run__variant_id"]].append(row)
    return by_variant


def _summary(rows: list[dict]) -> dict:
    """Latest correct tok/s, the previous commit's, the change, the latest run's correctness and
outcome, and the sparkline."""
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
        "outcome": newest and newest["run__outcome"], "outcome_final": newest and newest["run__outcome_final"],
        # the outcome's commit, shown only where it is not the tok/s figure's: the row then mixes two commits
        "outcome_commit": _other_commit(newest, latest),
        "spark": ",".join(f"{r['value']:.4g}" for r in reversed(good)),
    }


def _other_commit(newest: dict | None, latest: dict | None) -> str:
    """NEWEST's commit when it is not LATEST's run's commit ("" when the same, or unknown)."""
    if not newest or not newest["run__commit"] or (latest and newest["run__commit"] == latest["run__commit"]):
        return ""
    return newest["run__commit"]


def _compute(benchmarks: list[Benchmark], every: bool = False) -> dict[int, list[dict]]:
    """Per benchmark id of BENCHMARKS, its variants' summaries [{variant, latest, previous, change,
    verdict, verdict_run, outcome, outcome_final, outcome_commit, spark}] in position order, from the raw tables
    (EVERY: BENCHMARKS are all there are)."""
    variants = _variants_with_cutoff()
    if not every:
        variants = variants.filter(benchmark_id__in=[b.pk for b in benchmarks])
    variants = list(variants)
    recent = _recent_decode_rows(variants)
    lines = {b.pk: main_line(b) for b in benchmarks}
    out = {b.pk: [] for b in benchmarks}
    for variant in variants:
        if variant.benchmark_id not in out:  # a benchmark made after the list was read
            continue
        line = lines[variant.benchmark_id]  # other branches' runs are not the variant's figure
        rows = [r for r in recent.get(variant.pk, []) if not line or r["run__branch"] == line]
        out[variant.benchmark_id].append({"variant": variant, **_summary(rows)})
    return out


def home_benchmarks(*, cached: bool = True) -> list[dict]:
    """[{benchmark, variants: [{variant, latest, previous, change, verdict, spark, ...}], active: [Run]}]:
    the variants' summaries from the cache where their benchmark's data did not change since
    (home_cache; CACHED False: every one from the raw tables, the cache neither read nor written),
    the active runs read every time."""
    benchmarks = list(home_cache.with_versions(Benchmark.objects.order_by("name")))
    if cached:
        summaries = home_cache.summaries(
            benchmarks, lambda missing: _compute(missing, every=len(missing) == len(benchmarks)))
    else:
        summaries = _compute(benchmarks, every=True)
    for b in benchmarks:
        for s in summaries[b.pk]:
            s["variant"].benchmark = b  # left out of the cached entry
    active = defaultdict(list)
    runs = (Run.objects.filter(state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES])
            .select_related("variant").order_by("created_at", "id")[:ACTIVE_LIMIT])
    for run in runs:
        active[run.benchmark_id].append(run)
    return [{"benchmark": b, "variants": summaries[b.pk], "active": active[b.pk]} for b in benchmarks]
