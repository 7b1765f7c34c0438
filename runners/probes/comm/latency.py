"""The comm probe as a job runs it: one per-call allreduce cost at a model's decode size,
measured before the engine starts, while the GPUs are free (the analytic allreduce share's
input, runners/analysis/share.py).

    config = model_config(spec.model)                       # the model's config.json, or None
    point = comm_latency(tensor_parallel_size=2, hidden_size=config["hidden_size"],
                         dtype=comm_dtype(config, engine_args), env=engine_env, graph=True, config=config)
"""
from __future__ import annotations

import json
from pathlib import Path

from .interleaved import run_interleaved
from .options import DTYPE_SHORT, DTYPES
from .sweep import run_sweep


def model_config(model: str) -> dict | None:
    path = Path(model) / "config.json"
    return json.loads(path.read_text()) if path.exists() else None


def comm_dtype(config: dict, engine_args: list[str]) -> str:
    """The activation dtype: `--dtype` when given, else the model's."""
    if "--dtype" in engine_args and engine_args.index("--dtype") + 1 < len(engine_args):
        name = engine_args[engine_args.index("--dtype") + 1]
    else:
        name = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return DTYPE_SHORT.get(name.replace("torch.", ""), "bf16")


def comm_latency(*, tensor_parallel_size: int, hidden_size: int, dtype: str, env: dict, graph: bool,
                 config: dict | None = None, custom_allreduce: bool = False) -> dict:
    """The per-call allreduce cost of a decode step, from the comm probe, before the engine starts.

    With CUDA graphs on GPUs and a model config: the interleaved mode's marginal cost inside a
    proxy step of the model's own GEMV sizes (it tracks the A/B marginal cost; an allreduce
    timed alone does not). Otherwise, or when that fails: the plain sweep's point at one
    token's hidden state (graph or eager), with a note saying why.

    `custom_allreduce`: the engine reduces with vLLM's custom kernel (TP on NVLink, not turned
    off), so the interleaved mode times that kernel; where it cannot (no vLLM beside the probe,
    or vLLM turns it off on this host), NCCL's figure is used and a note says so."""
    proto = env.get("NCCL_PROTO", "default")  # env: the engine's whole environment (RunnerConfig.engine_env)
    notes = []
    if graph and config:
        for candidate in (["custom"] if custom_allreduce else []) + [proto]:
            try:
                point = _interleaved_point(tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                                           proto=candidate, config=config)
                return {**point, "notes": notes + point["notes"]}
            except Exception as e:  # noqa: BLE001 - fall back to the next method, and say why
                notes.append(f"interleaved mode ({candidate}) unavailable: {type(e).__name__}: {str(e)[-500:]}")
        notes.append("plain sweep used")
    point = _sweep_point(tensor_parallel_size=tensor_parallel_size, hidden_size=hidden_size, dtype=dtype,
                         proto=proto, graph=graph)
    return {**point, "notes": notes + point["notes"]}


def _interleaved_point(*, tensor_parallel_size: int, dtype: str, proto: str, config: dict) -> dict:
    doc = run_interleaved(backend="nccl", world_size=tensor_parallel_size, model_config=config,
                          dtype=dtype, protos=[proto], iters=60, warmup=5, graph=True,
                          timeout_s=300)
    if not doc["results"]:
        raise RuntimeError(f"no result: {doc.get('notes')}")
    row = doc["results"][0]
    return {"us_per_call": row["us"], "mode": "interleaved", "bytes": row["bytes"], "proto": proto,
            "backend": doc["backend"], "step_us_with": row["step_us_with"],
            "step_us_without": row["step_us_without"], "calls": row["calls"], "layers": doc["layers"],
            "gemv_bytes": doc["gemv_bytes"], "notes": doc.get("notes", [])}


def _sweep_point(*, tensor_parallel_size: int, hidden_size: int, dtype: str, proto: str, graph: bool) -> dict:
    size = hidden_size * DTYPES[dtype][1]
    doc = run_sweep(world_size=tensor_parallel_size, sizes=[size], dtype=dtype, protos=[proto],
                    iters=50, warmup=10, graph=graph, timeout_s=300)
    modes = {r["mode"]: r for r in doc["results"]}
    chosen = modes.get("graph" if graph else "eager") or modes.get("eager")
    if chosen is None:
        raise RuntimeError(f"comm probe gave no result: {doc.get('notes')}")
    return {"us_per_call": chosen["us"], "mode": chosen["mode"], "bytes": size, "proto": proto,
            "backend": doc["backend"], "notes": doc.get("notes", [])}
