"""The optimization waterfall of one commit: every ladder step's tok/s against the step it builds
on (Variant.builds_on, else the previous position), gains and losses alike, with the step's
allreduce share and whether the setting it changes took effect."""
from __future__ import annotations

import re
import uuid

from django.db.models import OuterRef, Subquery

from runners.contract import ALLREDUCE_SHARE, CORRECT, DECODE_TOK_S

from ..models import Annotation, Benchmark, Measurement, Run
from ..lifecycle.tookeffect import took_effect_view
from ..domain.units import change_text, chart_display, number

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
           .exclude(trigger=Run.Trigger.PULL)
           .order_by("-created_at", "-id").values("commit", "batch").first())
    return None if run is None else (run["commit"] or str(run["batch"]))


def _decode_by_variant(benchmark: Benchmark, at: str, point: str = "") -> dict[int, dict]:
    """Each variant's decode tok/s and allreduce share at AT, at workload POINT ("" the first);
    the output's verdict is the run's."""
    at_point = Measurement.all_points.filter(point=point) if point else Measurement.objects.all()
    verdict = Measurement.objects.filter(run=OuterRef("run"), metric=CORRECT).values("value")[:1]
    share = at_point.filter(run=OuterRef("run"), metric=ALLREDUCE_SHARE).values("value")[:1]
    rows = (at_point.filter(run__benchmark=benchmark, run__state=Run.State.SUCCEEDED, metric=DECODE_TOK_S,
                            **{f"run__{k}": v for k, v in _at_filter(at).items()})
            .annotate(verdict=Subquery(verdict), share=Subquery(share))
            .order_by("run__created_at", "run__id")
            .values("run_id", "run__variant_id", "run__commit", "run__created_at", "run__started_at", "run__finished_at",
                    "run__took_effect", "value", "ci_low", "ci_high", "verdict", "share"))
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
                      "gain_pct": gain / base_row["value"] if gain is not None and base_row["value"] else None,
                      "took_effect": took_effect_view(row["run__took_effect"]) if row else None})
        previous = variant
    return steps


def _story(steps: list[dict]) -> str:
    """'eager 49.42 tok/s -> cuda graphs 293.2 (+493.3%) -> NCCL LL 271.1 (−7.5%)': every step
    that ran, its change against the step it builds on."""
    parts = []
    for step in steps:
        if not step["row"]:
            continue
        name, value = step["variant"].name, number(step["row"]["value"])
        if step["incorrect"]:
            parts.append(f"{name}: incorrect output")
        elif not parts:
            parts.append(f"{name} {value} tok/s")
        else:
            parts.append(f"{name} {value}" + (f" ({change_text(step['gain_pct'])})" if step["gain_pct"] is not None else ""))
    return " -> ".join(parts)


def _notes(benchmark: Benchmark, found: dict[int, dict]) -> list[Annotation]:
    """The benchmark's annotations that cover these runs: at their commit, or over their dates."""
    rows = list(found.values())
    commit = rows[0]["run__commit"]
    times = [t for row in rows for t in (row["run__started_at"] or row["run__created_at"], row["run__finished_at"]) if t]
    first, last = min(times), max(times)
    notes = []
    for note in benchmark.annotations.order_by("starts_at", "id"):
        if note.commit:
            if commit and commit.startswith(note.commit):
                notes.append(note)
        elif note.starts_at and note.starts_at <= last and (note.ends_at is None or note.ends_at >= first):
            notes.append(note)
    return notes


def benchmark_waterfall(*, benchmark: Benchmark, at: str | None = None, point: str = "") -> dict:
    """The ladder at AT (newest by default) and workload POINT ("" the first point). Raises
    BadWaterfallQuery for a malformed `at`, NoRunsAt when nothing ran there."""
    at = at or _latest_at(benchmark)
    if at is None:
        raise NoRunsAt("this benchmark has no successful run yet")
    found = _decode_by_variant(benchmark, at, point)
    if not found:
        raise NoRunsAt(f"no successful run of {benchmark.name} at {at}" + (f" measured point {point}" if point else ""))
    variants = list(benchmark.variants.order_by("position"))
    steps = _steps(variants, found)
    correct = [s for s in steps if s["row"] and not s["incorrect"]]
    fastest = max(correct, key=lambda s: s["row"]["value"]) if correct else None
    return {"at": at, "steps": steps, "fastest": fastest, "story": _story(steps), "notes": _notes(benchmark, found),
            "commit": next(iter(found.values()))["run__commit"]}


def waterfall_chart_data(waterfall: dict | None) -> list[dict]:
    """The bars: the baseline from 0, each later step from its base's tok/s to its own (a loss
    runs downwards); its allreduce share and what its took-effect check says."""
    bars = []
    for step in (waterfall or {}).get("steps", []):
        row = step["row"]
        if row is None:
            continue
        base = next((s["row"]["value"] for s in waterfall["steps"] if s["variant"] == step["base"] and s["row"]), 0.0)
        took = step["took_effect"]
        bars.append({"label": step["variant"].name, "from": base if step["base"] else 0.0, "to": row["value"],
                     "gain": step["gain"], "gain_pct": step["gain_pct"], "incorrect": step["incorrect"],
                     "loss": step["gain"] is not None and step["gain"] < 0, "share": row["share"],
                     "took_effect": took["summary"] if took else "", "no_effect": bool(took and took["flagged"]),
                     "no_effect_settings": took["flagged_settings"] if took else [], "run": row["run_id"]})
    return bars


def share_axis() -> dict:
    """The label, unit (%) and factor of the chart's allreduce-share axis."""
    return chart_display(ALLREDUCE_SHARE)
