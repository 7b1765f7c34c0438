"""What the built-in probes share: a probe's measurements typed for the result, a JSON document as
an artifact, a secondary measurement that must not fail the run, the engine's log."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from runners.contract import PROBE_JSON, ArtifactRef, JobSpec, Measurement
from runners import workloads
from runners.outputs.artifacts import text_artifact

from .registry import ProbeContext


def typed(measurements: list[dict]) -> list[Measurement]:
    return [Measurement.from_dict(m, i) for i, m in enumerate(measurements)]


def json_artifact(name: str, doc, indent: int | None = 1) -> ArtifactRef:
    return ArtifactRef.from_dict(text_artifact(PROBE_JSON, name, json.dumps(doc, indent=indent)))


def secondary(probe: Callable[[], dict]) -> dict:
    """Run a probe whose failure must not cost the run its decode figures: the error is kept
    in its document (and the measurements it would give are left out)."""
    try:
        return probe()
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed: it lands in the artifact
        return {"error": f"{type(exc).__name__}: {exc}", "problems": [str(exc)]}


def tensor_parallel(spec: JobSpec) -> bool:
    return int(spec.tensor_parallel_size) >= 2


def engine_log(ctx: ProbeContext) -> str:
    path = getattr(ctx.engine, "log_path", None)
    return Path(path).read_text(errors="replace") if path is not None and Path(path).is_file() else ""


def points_to_run(ctx: ProbeContext) -> list[tuple]:
    """Each workload point of the job with the reason it is skipped ("" when it runs: a point the
    engine cannot hold, runners/workloads.py). A single point always runs (its errors fail the
    job); with several, the engine's log is read once for its KV capacity."""
    points = ctx.spec.workloads
    if len(points) == 1:
        return [(points[0], "")]
    kv_tokens = workloads.kv_capacity_tokens(engine_log(ctx))
    return [(point, workloads.skip_reason(point, args=ctx.engine_args, kv_tokens=kv_tokens)) for point in points]
