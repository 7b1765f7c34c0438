"""The allreduce share of a decode step, triangulated (DESIGN.md, "The probes"):

* profiler: calls per step, us per call and share per rank from vLLM's torch profiler;
* analytic: calls per step x the comm probe's per-call latency at the model's hidden size,
  against the step time the decode probe measured, and the ceiling "tok/s if allreduce were
  free";
* A/B (ladder steps that change only a comm setting) is computed by the service, which sees
  the whole batch.

This module turns the probes' raw results into measurements and flags disagreement.
"""
import json
from pathlib import Path

from runners import contract
from runners.contract import measurement

from .analyze import decompose

# Profiler and analytic shares further apart than this (absolute) are flagged.
DISAGREEMENT = 0.10
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


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
    import os

    proto = env.get("NCCL_PROTO", os.environ.get("NCCL_PROTO", "default"))
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
    from runners.probes.comm_interleaved import run_interleaved

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
    from runners.probes.comm import DTYPES, run_sweep

    size = hidden_size * DTYPES[dtype][1]
    doc = run_sweep(world_size=tensor_parallel_size, sizes=[size], dtype=dtype, protos=[proto],
                    iters=50, warmup=10, graph=graph, timeout_s=300)
    modes = {r["mode"]: r for r in doc["results"]}
    chosen = modes.get("graph" if graph else "eager") or modes.get("eager")
    if chosen is None:
        raise RuntimeError(f"comm probe gave no result: {doc.get('notes')}")
    return {"us_per_call": chosen["us"], "mode": chosen["mode"], "bytes": size, "proto": proto,
            "backend": doc["backend"], "notes": doc.get("notes", [])}


def share_measurements(*, decode_tok_s: float, profile: dict | None, comm: dict | None) -> list[dict]:
    """Measurements from the profiler result (allreduce probe) and the comm probe point."""
    out = []
    step_ms = 1000.0 / decode_tok_s
    calls = profile.get("calls_per_step") if profile else None
    profiler_share = profile.get("share_min") if profile else None
    if profile:
        details = {"method": "profiler", "share_max": profile.get("share_max"),
                   "per_rank": [{k: r.get(k) for k in ("rank", "allreduce_share", "allreduce_us_per_call",
                                                       "allreduce_calls_per_step", "step_ms_median", "source")}
                                for r in profile.get("ranks", [])],
                   "problems": profile.get("problems", []),
                   "note": "lowest rank: the others include waiting for the slower rank"}
        if profiler_share is not None:
            out.append(measurement(contract.ALLREDUCE_SHARE, profiler_share, details=details))
        if calls is not None:
            out.append(measurement(contract.ALLREDUCE_CALLS_PER_STEP, calls,
                                   details={"expected": profile.get("expected_calls_per_step")}))
        if profile.get("us_per_call_min") is not None:
            out.append(measurement(contract.ALLREDUCE_US_PER_CALL, profile["us_per_call_min"], details={"method": "profiler"}))
        if profile.get("launch_gap_ms") is not None:
            out.append(measurement(contract.LAUNCH_GAP_MS, profile["launch_gap_ms"],
                                   details={"method": "profiler: decode step's kernel span minus its busy kernel time"}))
    if comm and "error" in comm:
        comm = None
    analytic = None
    if comm and calls:
        try:
            analytic = decompose(step_ms, calls, comm["us_per_call"])
        except ValueError as exc:
            comm = {**comm, "problem": str(exc)}
        if analytic:
            details = {"method": "analytic", "calls_per_step": calls, "comm": comm, "step_ms": step_ms,
                       "allreduce_ms_per_token": analytic["allreduce_ms_per_token"],
                       "compute_ms_per_token": analytic["compute_ms_per_token"]}
            if profiler_share is not None:
                details["profiler_share"] = profiler_share
                details["disagree"] = abs(analytic["allreduce_share"] - profiler_share) > DISAGREEMENT
            out.append(measurement(contract.ALLREDUCE_SHARE_ANALYTIC, analytic["allreduce_share"], details=details))
            out.append(measurement(contract.COMM_US_PER_CALL, comm["us_per_call"], details=comm))
    shares = {"profiler": profiler_share, "analytic": analytic["allreduce_share"] if analytic else None}
    ceiling = headline_ceiling(decode_tok_s, shares)
    if ceiling:
        out.append(measurement(contract.CEILING_TOK_S, ceiling["tok_s"], details=ceiling))
    return out


def headline_ceiling(decode_tok_s: float, shares: dict) -> dict | None:
    """The ceiling follows the run's headline share: the profiler's (measured in this run's own
    decode steps) when there is one, else the analytic estimate. The other share's ceiling is
    kept beside it, so a page can show the disagreement instead of a second headline."""
    by_method = {m: decode_tok_s / (1.0 - s) for m, s in shares.items() if s is not None and 0.0 <= s < 1.0}
    if not by_method:
        return None
    method = "profiler" if "profiler" in by_method else "analytic"
    return {"tok_s": by_method[method], "from": method, "share": shares[method],
            "meaning": f"decode tok/s if allreduce were free, from the {method} share (allreduce_share's headline)",
            "by_method": by_method}
