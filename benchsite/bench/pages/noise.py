"""How much decode tok/s moves on its own, per variant.

Across runs: the coefficient of variation (sample stdev / mean) of the last RECENT_RUNS
successful runs' decode tok/s with the newest run's settings (KeptSpec.settings; runs from
before specs were kept count with any), each run with its own engine start: a benchmark
re-applied with another max_tokens is not noise. Within runs: the median,
over those runs, of the CV of each run's clean repeats. Verdicts between commits need the
first; on the CPU engine it is far larger than the second. Flagged repeats (held-back
streams) are no samples here either."""
from __future__ import annotations

import statistics

from django.db.models import F, Q, Subquery

from runners.contract import DECODE_TOK_S

from ..models import Measurement, Run
from ..domain.samples import split_samples

RECENT_RUNS = 10
MIN_RUNS = 3  # a CV of two runs says little


def cv(values: list[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def _recent_runs(variant):
    """The variant's newest RECENT_RUNS successful runs of its newest run's settings."""
    runs = (Run.objects.filter(variant=variant, state=Run.State.SUCCEEDED).exclude(trigger=Run.Trigger.PULL)
            .order_by("-created_at", "-id"))
    newest = runs.values("kept_spec__settings")[:1]
    return runs.filter(Q(kept_spec__isnull=True) | Q(kept_spec__settings=Subquery(newest)))[:RECENT_RUNS]


def variant_noise(*, variants) -> dict[int, dict]:
    """{variant id: {"runs", "across_cv", "within_cv"}} for the variants given.

    One indexed query per variant for its newest successful runs (a window over all of a
    variant's runs cost 20-27 ms at 10,000 runs; these cost 3-4 ms together), then one for
    their decode figures: the count grows with the ladder, never with the history."""
    run_ids = [run_id for variant in variants for run_id in _recent_runs(variant).values_list("id", flat=True)]
    recent = (Measurement.objects.filter(metric=DECODE_TOK_S, run_id__in=run_ids)
              .only("value", "samples", "sample_flags").annotate(variant_id=F("run__variant_id")))
    by_variant: dict[int, list[Measurement]] = {}
    for m in recent:
        by_variant.setdefault(m.variant_id, []).append(m)
    out = {}
    for variant_id, ms in by_variant.items():
        within = [c for m in ms if (c := cv(split_samples(m)[0])) is not None]
        out[variant_id] = {
            "runs": len(ms),
            "across_cv": cv([m.value for m in ms]) if len(ms) >= MIN_RUNS else None,
            "within_cv": statistics.median(within) if within else None,
        }
    return out
