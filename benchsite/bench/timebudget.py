"""Where a decode step's time goes, for one run: allreduce, launch gaps (where the profiler trace
measured them: device idle between a step's kernels) and the rest of the step as a stacked bar, the ceiling if allreduce were free, the allreduce estimates side by side (profiler,
analytic from the comm probe, A/B against a neighbouring step) with a note where they disagree,
and the memory-bandwidth floor (weight bytes per GPU per token over the measured bandwidth)."""
from __future__ import annotations

from runners.contract import (AB_ALLREDUCE_MS_DELTA, ALLREDUCE_SHARE, ALLREDUCE_SHARE_ANALYTIC, DECODE_TOK_S,
                              LAUNCH_GAP_MS, MEM_BANDWIDTH_GB_S, WEIGHT_BYTES_PER_GPU)

DISAGREE_RATIO = 1.3  # estimates further apart than 30 % ...
DISAGREE_MS = 0.25    # ... and a quarter millisecond per token are called out


def _estimates(values: dict, step_ms: float, ab_details: dict) -> list[dict]:
    rows = []
    if values.get(ALLREDUCE_SHARE) is not None:
        rows.append({"method": "profiler", "ms": values[ALLREDUCE_SHARE] * step_ms,
                     "how": "torch profiler: allreduce kernels' share of the step (lowest rank)"})
    if values.get(ALLREDUCE_SHARE_ANALYTIC) is not None:
        rows.append({"method": "analytic", "ms": values[ALLREDUCE_SHARE_ANALYTIC] * step_ms,
                     "how": "calls per step x the comm probe's latency per call"})
    if values.get(AB_ALLREDUCE_MS_DELTA) is not None:
        against = ab_details.get("against_variant", "the neighbouring step")
        rows.append({"method": "A/B", "ms": values[AB_ALLREDUCE_MS_DELTA], "delta": True,
                     "how": f"decode ms per token against {against}, which differs only in a comm setting"})
    return rows


def _disagreement(rows: list[dict], ab_details: dict) -> str:
    notes = []
    totals = [r for r in rows if not r.get("delta")]
    if len(totals) == 2:
        lo, hi = sorted(r["ms"] for r in totals)
        if hi - lo > DISAGREE_MS and (lo <= 0 or hi / lo > DISAGREE_RATIO):
            notes.append(f"profiler and analytic estimates differ: {totals[0]['ms']:.3f} vs {totals[1]['ms']:.3f} ms "
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
    primary = next((r for r in estimates if not r.get("delta")), None)
    budget = {"tok_s": tok_s, "step_ms": step_ms, "estimates": estimates,
              "disagreement": _disagreement(estimates, ab_details), "allreduce_ms": None, "rest_ms": step_ms,
              "ceiling_tok_s": None, "floor_ms": None, "floor_pct": None,
              "bandwidth_gb_s": values.get(MEM_BANDWIDTH_GB_S), "weight_bytes": values.get(WEIGHT_BYTES_PER_GPU)}
    if primary and 0 <= primary["ms"] < step_ms:
        budget.update(allreduce_ms=primary["ms"], allreduce_from=primary["method"], rest_ms=step_ms - primary["ms"],
                      ceiling_tok_s=1000.0 / (step_ms - primary["ms"]))
    gap_ms = values.get(LAUNCH_GAP_MS)
    budget["gap_ms"] = None
    if gap_ms is not None and 0 <= gap_ms < budget["rest_ms"]:  # device idle between kernels: out of the rest
        budget.update(gap_ms=gap_ms, rest_ms=budget["rest_ms"] - gap_ms)
    if budget["bandwidth_gb_s"] and budget["weight_bytes"]:
        floor_ms = budget["weight_bytes"] / (budget["bandwidth_gb_s"] * 1e9) * 1000.0
        budget.update(floor_ms=floor_ms, floor_pct=floor_ms / step_ms)
    return budget
