"""The optimization waterfall of one commit: each ladder step's tok/s against the step it
builds on (Variant.builds_on, else the previous position), from the baseline to the fastest
correct variant."""
from __future__ import annotations

import re
import uuid

from django.db.models import OuterRef, Subquery

from runners.contract import CORRECT, DECODE_TOK_S

from .models import Benchmark, Measurement, Run

_COMMIT_RE = re.compile(r"^[0-9a-f]{4,64}$")


class BadWaterfallQuery(ValueError):
    """`?commit=` is neither a commit (prefix) nor a batch id."""


class NoRunsAt(LookupError):
    """No successful run of the benchmark at that commit."""


def _at_filter(at: str) -> dict:
    if _COMMIT_RE.match(at):
        return {"commit__startswith": at}
    try:
        return {"batch": uuid.UUID(at)}
    except ValueError:
        raise BadWaterfallQuery(f"commit must be a hex commit (prefix of 4-64 characters) or a batch id, not {at!r}") from None


def _latest_at(benchmark: Benchmark) -> str | None:
    run = (Run.objects.filter(benchmark=benchmark, state=Run.State.SUCCEEDED, measurements__metric=DECODE_TOK_S)
           .order_by("-created_at", "-id").values("commit", "batch").first())
    return None if run is None else (run["commit"] or str(run["batch"]))


def _decode_by_variant(benchmark: Benchmark, at: str) -> dict[int, dict]:
    verdict = Measurement.objects.filter(run=OuterRef("run"), metric=CORRECT).values("value")[:1]
    rows = (Measurement.objects.filter(run__benchmark=benchmark, run__state=Run.State.SUCCEEDED, metric=DECODE_TOK_S,
                                       **{f"run__{k}": v for k, v in _at_filter(at).items()})
            .annotate(verdict=Subquery(verdict))
            .order_by("run__created_at", "run__id")
            .values("run_id", "run__variant_id", "run__commit", "run__created_at", "value", "ci_low", "ci_high", "verdict"))
    return {row["run__variant_id"]: row for row in rows}  # the newest run of each variant wins


def _steps(variants, found: dict[int, dict]) -> list[dict]:
    steps, previous = [], None
    by_id = {v.pk: v for v in variants}
    for variant in variants:
        base = by_id.get(variant.builds_on_id) if variant.builds_on_id else previous
        row, base_row = found.get(variant.pk), found.get(base.pk) if base else None
        gain = row["value"] - base_row["value"] if row and base_row else None
        steps.append({"variant": variant, "base": base, "row": row, "gain": gain,
                      "incorrect": bool(row and row["verdict"] == 0),
                      "gain_pct": gain / base_row["value"] if gain is not None and base_row["value"] else None})
        previous = variant
    return steps


def _story(steps: list[dict]) -> str:
    parts = []
    for step in steps:
        if not step["row"] or step["incorrect"]:
            continue
        value = f"{step['row']['value']:.3g}" if step["row"]["value"] < 100 else f"{step['row']['value']:.0f}"
        parts.append(f"{'+' if parts else ''}{step['variant'].name} {value}")
    return " -> ".join(parts) + " tok/s" if parts else ""


def benchmark_waterfall(*, benchmark: Benchmark, at: str | None = None) -> dict:
    """Raises BadWaterfallQuery for a malformed `at`, NoRunsAt when nothing ran there."""
    at = at or _latest_at(benchmark)
    if at is None:
        raise NoRunsAt("this benchmark has no successful run yet")
    found = _decode_by_variant(benchmark, at)
    if not found:
        raise NoRunsAt(f"no successful run of {benchmark.name} at {at}")
    variants = list(benchmark.variants.order_by("position"))
    steps = _steps(variants, found)
    correct = [s for s in steps if s["row"] and not s["incorrect"]]
    fastest = max(correct, key=lambda s: s["row"]["value"]) if correct else None
    if fastest:  # the ladder up to the fastest correct variant; later steps did not help
        steps = steps[: steps.index(fastest) + 1]
    return {"at": at, "steps": steps, "fastest": fastest, "story": _story(steps),
            "commit": next(iter(found.values()))["run__commit"]}


def waterfall_chart_data(waterfall: dict | None) -> list[dict]:
    """The bars: the baseline from 0, each later step from its base's tok/s to its own."""
    bars = []
    for step in (waterfall or {}).get("steps", []):
        row = step["row"]
        if row is None:
            continue
        base = next((s["row"]["value"] for s in waterfall["steps"] if s["variant"] == step["base"] and s["row"]), 0.0)
        bars.append({"label": step["variant"].name, "from": base if step["base"] else 0.0, "to": row["value"],
                     "gain": step["gain"], "incorrect": step["incorrect"], "run": row["run_id"]})
    return bars
