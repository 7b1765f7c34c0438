"""Reads for the run page beyond its facts: live progress, correctness evidence with both
outputs, the time budget, and the command that reproduces the run on a GPU host."""
from __future__ import annotations

import json
import shlex

from django.urls import reverse
from django.utils import timezone

from runners.analysis.floor import mean_context, point_floor
from runners.contract import (AB_ALLREDUCE_MS_DELTA, ALLREDUCE_SHARE, CORRECT, DECODE_TOK_S, GREEDY_ARTIFACT, ITL_MS_P50,
                              KV_BYTES_PER_TOKEN, MEM_BANDWIDTH_GB_S, TTFT_MS, WEIGHT_BYTES_PER_GPU)

from ..worker import pools
from . import selectors
from ..lifecycle import jobspec
from ..storage.artifacts import ArtifactError
from ..models import Artifact, Measurement, Run
from ..domain.units import metric_text
from ..lifecycle.timebudget import run_time_budget


def run_elapsed_s(run: Run) -> float | None:
    if run.started_at is None:
        return None
    return max(0.0, ((run.finished_at or timezone.now()) - run.started_at).total_seconds())


def run_live(*, run: Run) -> dict:
    """The polled JSON: run_status plus elapsed seconds, the server log's tail (the worker's live
    tail while the run is active) and, while queued, its place in its pool's queue."""
    _artifact, tail = selectors.run_log_tail(run=run)
    return {**selectors.run_status(run=run), "elapsed_s": run_elapsed_s(run), "log_tail": tail,
            "queue": pools.run_queue(run), "spec": run_spec_link(run)}


def run_spec_link(run: Run) -> dict:
    """Where the run's job spec is, whether it is the one it was sent (False: rebuilt), and its
    settings digest (runs of one digest are one series; None: not kept)."""
    kept = run.kept_spec_id is not None
    return {"url": reverse("bench:run-spec", args=[run.pk]), "as_sent": kept,
            "settings": run.kept_spec.settings if kept else None}


def _greedy_text(run_id: int | None) -> str | None:
    if run_id is None:
        return None
    artifact = (Artifact.objects.filter(run_id=run_id, kind=Artifact.Kind.PROBE_JSON, name=GREEDY_ARTIFACT)
                .exclude(file="").first())
    if artifact is None:
        return None
    try:
        return json.loads(artifact.read_text()).get("text")
    except (ValueError, AttributeError, ArtifactError):
        return None


def run_correctness(*, measurements) -> dict | None:
    """The verdict's evidence (first divergence, reason) and both greedy texts; None when not judged."""
    verdict = next((m for m in measurements if m.metric == CORRECT), None)
    if verdict is None:
        return None
    details = verdict.details or {}
    reference_run = details.get("reference_run")
    return {"correct": verdict.value == 1.0, "details": details, "reference_run": reference_run,
            "verdict": details.get("verdict", "correct" if verdict.value == 1.0 else "incorrect"),
            "text": _greedy_text(verdict.run_id), "reference_text": _greedy_text(reference_run)}


def run_budget(*, measurements) -> dict | None:
    values = {m.metric: m.value for m in measurements}
    ab = next((m.details for m in measurements if m.metric == AB_ALLREDUCE_MS_DELTA), None)
    return run_time_budget(values=values, ab_details=ab)


REBUILT_NOTE = "rebuilt from the benchmark as it is now; it may differ from what ran"


def run_reproduce(*, run: Run) -> dict:
    """The job spec as JSON and the command that runs it with the runners alone: the spec the
    run was sent (kept from its trigger on), or for a run from before specs were kept (or an
    imported one) its spec rebuilt from the benchmark as it is now, which `note` says."""
    spec = jobspec.run_spec(run)
    as_sent = run.kept_spec_id is not None
    spec_name = f"run-{run.pk}-spec.json"
    command = shlex.join(["python", "-m", "runners", "execute", spec_name, "--out", f"run-{run.pk}-result.json"])
    return {"spec_json": json.dumps(spec, indent=2, sort_keys=True), "spec_name": spec_name, "command": command,
            "model": spec["model"], "as_sent": as_sent, "note": "" if as_sent else REBUILT_NOTE}


# The run page's table of workload points: (heading, metric, the metric whose unit it reads in).
# The multi-stream figures are the concurrency probe's; a run without them shows '–'.
POINT_COLUMNS = (("decode tok/s", DECODE_TOK_S, DECODE_TOK_S), ("slowest stream", "slowest_stream_tok_s", DECODE_TOK_S),
                 ("aggregate", "aggregate_tok_s", DECODE_TOK_S), ("TTFT p50", TTFT_MS, TTFT_MS),
                 ("ITL p50", ITL_MS_P50, ITL_MS_P50), ("allreduce share", ALLREDUCE_SHARE, ALLREDUCE_SHARE))


FLOOR_INPUTS = (WEIGHT_BYTES_PER_GPU, KV_BYTES_PER_TOKEN, MEM_BANDWIDTH_GB_S)


def run_points(*, run: Run) -> dict | None:
    """The run's workload points side by side, the first first; None for a run of one point.
    The last column is each point's memory-bandwidth floor against its measured step."""
    rows = Measurement.all_points.filter(run=run, metric__in=[*(metric for _, metric, _ in POINT_COLUMNS), *FLOOR_INPUTS])
    first = run.benchmark.default_point
    values: dict[str, dict[str, float]] = {}
    for m in rows.order_by("-first_point", "id"):
        values.setdefault(m.point or first, {})[m.metric] = m.value  # a row without a point: the first point's
    if len(values) < 2:
        return None
    inputs = {metric: values.get(first, {}).get(metric) for metric in FLOOR_INPUTS}
    shapes = {p.id: p for p in run.benchmark.points}
    return {"headings": [heading for heading, _, _ in POINT_COLUMNS] + ["floor of the step"],
            "rows": [{"point": point, "cells": [metric_text(unit, figures.get(metric)) for _, metric, unit in POINT_COLUMNS]
                      + [_floor_text(shapes.get(point), figures.get(DECODE_TOK_S), inputs)]}
                     for point, figures in values.items()],
            "share_chart": share_by_concurrency(shapes, {p: f[ALLREDUCE_SHARE] for p, f in values.items()
                                                         if f.get(ALLREDUCE_SHARE) is not None})}


def share_by_concurrency(shapes: dict, shares: dict[str, float]) -> dict | None:
    """The "allreduce share vs concurrency" chart's data: one line per prompt length (and request
    rate), its points by concurrency, the share in %; None unless 2+ points have a share."""
    lines: dict[tuple, list[dict]] = {}
    for point_id, share in shares.items():
        point = shapes.get(point_id)
        if point is None:  # a point the benchmark no longer lists: its shape is unknown
            continue
        lines.setdefault((point.prompt_tokens or 0, point.request_rate or 0.0), []).append(
            {"x": point.concurrency, "y": round(100.0 * share, 2), "point": point_id})
    if sum(len(line) for line in lines.values()) < 2:
        return None
    return {"unit": "%", "x_label": "concurrency (streams at once)", "y_label": "allreduce share of a decode step (%)",
            "lines": [{"label": _line_label(prompt, rate), "points": sorted(line, key=lambda d: (d["x"], d["point"]))}
                      for (prompt, rate), line in sorted(lines.items())]}


def _line_label(prompt_tokens: int, request_rate: float) -> str:
    label = f"{prompt_tokens}-token prompt" if prompt_tokens else "the benchmark's prompt"
    return label + (f", {request_rate:g} requests/s" if request_rate else "")


def _floor_text(point, tok_s: float | None, inputs: dict) -> str:
    """'4.1 ms of 4.65 ms (89%)': the bytes a step must read (weights + every stream's KV cache)
    over the measured bandwidth, against the step a stream's rate gives; '–' without the inputs."""
    weights, bandwidth = inputs[WEIGHT_BYTES_PER_GPU], inputs[MEM_BANDWIDTH_GB_S]
    if point is None or not tok_s or not weights or not bandwidth:
        return "–"
    floor = point_floor(weight_bytes=weights, kv_bytes_per_token=inputs[KV_BYTES_PER_TOKEN], bandwidth_gb_s=bandwidth,
                        concurrency=point.concurrency, context_tokens=mean_context(point.prompt_tokens, point.max_tokens),
                        step_ms=1000.0 / tok_s)
    return (f"{metric_text(TTFT_MS, floor['floor_ms'])} of {metric_text(TTFT_MS, 1000.0 / tok_s)} "
            f"({floor['share']:.0%})")
