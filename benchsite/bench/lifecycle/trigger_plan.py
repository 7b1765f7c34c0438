"""What a trigger form will queue, spelled out on the confirm page before anything is queued:
the runs, the pool and queue they go to, the engine and each variant's effective settings."""
from __future__ import annotations

import base64
import hashlib

from ..models import Benchmark, EngineSource
from ..worker.pools import pool_queue, pool_status


def trigger_plan(*, benchmark: Benchmark, variants: list, ref: str, patch: dict | None,
                 repeats: int | None = None) -> dict:
    source = benchmark.engine_source
    if source is not None and source.kind == EngineSource.Kind.GIT:
        at = ref or source.default_ref or "its default branch"
        engine = f"built from {source.repo_url} at {at} (the worker resolves it to a commit)"
    else:
        engine = "the engine installed on the worker"
    rows = [{"position": v.position, "name": v.name, "reference": v.is_reference,
             "flags": [*benchmark.engine_args, *v.flags], "env": {**benchmark.engine_env, **v.env},
             "patches": [p.name for p in v.patches.all()]} for v in variants]
    upload = None
    if patch:
        raw = patch["content"].encode()
        upload = {"name": patch["name"], "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()[:12],
                  "files": patch["content"].count("\n+++ ") + patch["content"].startswith("+++ "),
                  "b64": base64.b64encode(raw).decode()}
    return {"runs": len(rows), "variants": rows, "pool": benchmark.gpu_pool, "queue": benchmark.queue,
            "engine": engine, "ref": ref, "patch": upload,
            # `repeats_asked` is carried to the confirm POST (blank: the benchmark's stays in force).
            "repeats": repeats or benchmark.repeats, "repeats_asked": repeats,
            "benchmark_patches": [p.name for p in benchmark.patches.all()],
            # Who serves the pool (or since when nobody has), and how many runs wait there already.
            "pool_status": pool_status(benchmark.gpu_pool), "pool_waiting": pool_queue(benchmark.gpu_pool).count()}
