"""The allreduce share of a decode step, triangulated (docs/methods/allreduce-share.md):

* profiler: calls per step, us per call and share per rank from vLLM's torch profiler;
* analytic: calls per step x the comm probe's per-call latency at the model's hidden size,
  against the step time the decode probe measured, and the ceiling "tok/s if allreduce were
  free";
* A/B (ladder steps that change only a comm setting) is computed by the service, which sees
  the whole batch.

This module turns the probes' raw results into measurements and flags disagreement (pure
computation: the comm probe's point is measured by runners/probes/comm/latency.py).
"""
from runners import contract
from runners.contract import measurement

from .analyze import decompose

# Profiler and analytic shares further apart than this (absolute) are flagged.
DISAGREEMENT = 0.10


def share_measurements(*, decode_tok_s: float, profile: dict | None, comm: dict | None) -> list[dict]:
    """Measurements from the profiler result (allreduce probe) and the comm probe point."""
    step_ms = 1000.0 / decode_tok_s
    calls = profile.get("calls_per_step") if profile else None
    profiler_share = profile.get("share_min") if profile else None
    out = profiler_measurements(profile)
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


def with_headline_ceiling(measurements: list[dict]) -> list[dict]:
    """The measurements with `ceiling_tok_s` recomputed from the headline share (headline_ceiling),
    for results written before the ceiling followed it; unchanged when they lack the inputs."""
    by_name = {m["metric"]: m for m in measurements}
    if contract.CEILING_TOK_S not in by_name or contract.DECODE_TOK_S not in by_name:
        return measurements
    shares = {"profiler": by_name.get(contract.ALLREDUCE_SHARE, {}).get("value"),
              "analytic": by_name.get(contract.ALLREDUCE_SHARE_ANALYTIC, {}).get("value")}
    ceiling = headline_ceiling(by_name[contract.DECODE_TOK_S]["value"], shares)
    if ceiling is None:
        return measurements
    return [measurement(contract.CEILING_TOK_S, ceiling["tok_s"], details=ceiling)
            if m["metric"] == contract.CEILING_TOK_S else m for m in measurements]


def profiler_measurements(profile: dict | None) -> list[dict]:
    """The profiler's own figures (share, calls per step, us per call, launch gap) of one
    allreduce session; [] without a profile."""
    out: list[dict] = []
    if not profile:
        return out
    calls, profiler_share = profile.get("calls_per_step"), profile.get("share_min")
    details = {"method": "profiler", "share_max": profile.get("share_max"),
               "per_rank": [{k: r.get(k) for k in ("rank", "allreduce_share", "allreduce_us_per_call",
                                                   "allreduce_calls_per_step", "step_ms_median", "source")}
                            for r in profile.get("ranks", [])],
               "problems": profile.get("problems", []),
               "note": "lowest rank: the others include waiting for the slower rank",
               **{k: profile[k] for k in ("concurrency", "prompt_tokens") if k in profile}}  # a point's session
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
    return out
