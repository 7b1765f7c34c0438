"""Where a decode step's time goes, for one run: allreduce, launch gaps (where the profiler trace
measured them: device idle between a step's kernels) and the rest of the step as a stacked bar,
and the memory-bandwidth floor (weight bytes per GPU per token over the measured bandwidth).

A run has ONE headline allreduce time per step and ONE ceiling ("tok/s if allreduce were free"),
the same as its stored `allreduce_share` and `ceiling_tok_s`: from the profiler's share of the
step (measured in this run's own decode steps), else the analytic share (comm probe). Every other
method is shown beside it as an estimate: the profiler's calls x us per call, the comm probe's
calls x latency, and the A/B difference against a neighbouring step."""
from __future__ import annotations

from runners.contract import (AB_ALLREDUCE_MS_DELTA, ALLREDUCE_CALLS_PER_STEP, ALLREDUCE_SHARE,
                              ALLREDUCE_SHARE_ANALYTIC, ALLREDUCE_US_PER_CALL, COMM_US_PER_CALL, DECODE_TOK_S,
                              LAUNCH_GAP_MS, MEM_BANDWIDTH_GB_S, WEIGHT_BYTES_PER_GPU)

DISAGREE_RATIO = 1.3  # estimates further apart than 30 % ...
DISAGREE_MS = 0.25    # ... and a quarter millisecond per token are called out


def headline_share(values: dict) -> tuple[float, str] | None:
    """(share, method) the run's headline allreduce time and ceiling follow."""
    for metric, method in ((ALLREDUCE_SHARE, "profiler"), (ALLREDUCE_SHARE_ANALYTIC, "analytic")):
        share = values.get(metric)
        if share is not None and 0.0 <= share < 1.0:
            return share, method
    return None


def _row(method: str, ms: float, step_ms: float, calls, how: str, *, us_per_call=None) -> dict:
    share = ms / step_ms
    return {"method": method, "ms": ms, "share": share, "how": how, "headline": False, "delta": False,
            "us_per_call": us_per_call if us_per_call is not None else (ms * 1000 / calls if calls else None),
            "ceiling_tok_s": 1000.0 / (step_ms - ms) if 0 <= ms < step_ms else None}


def _estimates(values: dict, step_ms: float, ab_details: dict) -> list[dict]:
    calls = values.get(ALLREDUCE_CALLS_PER_STEP)
    rows = []
    if values.get(ALLREDUCE_SHARE) is not None:
        rows.append(_row("profiler", values[ALLREDUCE_SHARE] * step_ms, step_ms, calls,
                         "torch profiler: allreduce kernels' share of the step (lowest rank)"))
    if calls and values.get(ALLREDUCE_US_PER_CALL):
        rows.append(_row("profiler, per call", calls * values[ALLREDUCE_US_PER_CALL] / 1000, step_ms, calls,
                         f"{calls:.0f} calls per step x the profiler's us per call (kernel time only)",
                         us_per_call=values[ALLREDUCE_US_PER_CALL]))
    if values.get(ALLREDUCE_SHARE_ANALYTIC) is not None:
        rows.append(_row("analytic", values[ALLREDUCE_SHARE_ANALYTIC] * step_ms, step_ms, calls,
                         "calls per step x the comm probe's latency per call (allreduce alone)",
                         us_per_call=values.get(COMM_US_PER_CALL)))
    if values.get(AB_ALLREDUCE_MS_DELTA) is not None:
        against = ab_details.get("against_variant", "the neighbouring step")
        rows.append({"method": "A/B", "ms": values[AB_ALLREDUCE_MS_DELTA], "delta": True, "headline": False,
                     "share": None, "us_per_call": ab_details.get("us_per_call_delta"), "ceiling_tok_s": None,
                     "how": f"decode ms per token against {against}, which differs only in a comm setting"})
    return rows


def _disagreement(rows: list[dict], ab_details: dict) -> str:
    notes = []
    totals = {r["method"]: r["ms"] for r in rows if r["method"] in ("profiler", "analytic")}
    if len(totals) == 2:
        lo, hi = sorted(totals.values())
        if hi - lo > DISAGREE_MS and (lo <= 0 or hi / lo > DISAGREE_RATIO):
            notes.append(f"profiler and analytic estimates differ: {totals['profiler']:.3f} vs {totals['analytic']:.3f} ms "
                         f"per token (the comm probe measures allreduce alone, without overlap or contention)")
    if ab_details.get("disagree"):
        notes.append(f"the A/B difference disagrees with the profiler's ({ab_details.get('profiler_delta_ms', 0):.3f} ms)")
    return "; ".join(notes)


def run_time_budget(*, values: dict, ab_details: dict | None = None) -> dict | None:
    """None when the run has no decode tok/s. `values` maps metric name to value."""
    tok_s = values.get(DECODE_TOK_S)
    if not tok_s:
        return None
    step_ms = 1000.0 / tok_s
    ab_details = ab_details or {}
    estimates = _estimates(values, step_ms, ab_details)
    budget = {"tok_s": tok_s, "step_ms": step_ms, "estimates": estimates, "calls": values.get(ALLREDUCE_CALLS_PER_STEP),
              "disagreement": _disagreement(estimates, ab_details), "allreduce_ms": None, "allreduce_share": None,
              "allreduce_from": None, "rest_ms": step_ms, "ceiling_tok_s": None, "floor_ms": None, "floor_pct": None,
              "bandwidth_gb_s": values.get(MEM_BANDWIDTH_GB_S), "weight_bytes": values.get(WEIGHT_BYTES_PER_GPU)}
    headline = headline_share(values)
    if headline:
        share, method = headline
        row = next(r for r in estimates if r["method"] == method)
        row["headline"] = True
        budget.update(allreduce_ms=row["ms"], allreduce_share=share, allreduce_from=method,
                      rest_ms=step_ms - row["ms"], ceiling_tok_s=tok_s / (1.0 - share))
    gap_ms = values.get(LAUNCH_GAP_MS)
    budget["gap_ms"] = None
    if gap_ms is not None and 0 <= gap_ms < budget["rest_ms"]:  # device idle between kernels: out of the rest
        budget.update(gap_ms=gap_ms, rest_ms=budget["rest_ms"] - gap_ms)
    if budget["bandwidth_gb_s"] and budget["weight_bytes"]:
        floor_ms = budget["weight_bytes"] / (budget["bandwidth_gb_s"] * 1e9) * 1000.0
        budget.update(floor_ms=floor_ms, floor_pct=floor_ms / step_ms)
    return budget
