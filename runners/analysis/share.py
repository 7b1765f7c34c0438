"""The headline ceiling of the allreduce share, "tok/s if allreduce were free"
(docs/methods/allreduce-share.md), pure: the share probe (runners.probes.allreduce_probe) stores
it, and the web side recomputes it for results written before it followed the headline share.
"""
from runners import contract
from runners.contract import measurement


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
