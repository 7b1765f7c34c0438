"""The server cross-check of a decode measurement: vLLM's own Prometheus histograms (read
before and after the measured repeats, runners.probes.metrics) against the client's timing.
The mean of `vllm:inter_token_latency_seconds` over the window is compared with the client's
mean ITL; `vllm:request_decode_time_seconds` gives the server's decode tok/s; a disagreement
beyond SERVER_DISAGREEMENT_WARN flags every clean sample `server_disagrees`.
"""
from __future__ import annotations

from typing import Any

from runners.probes.metrics import hist_delta

# Client vs server mean ITL: relative difference above which a warning is raised.
SERVER_DISAGREEMENT_WARN = 0.25


def compare_with_server(result: dict, server: dict, warnings: list[str]) -> None:
    """Add the server's figures and flag a client/server mean-ITL disagreement."""
    result["server_metrics"] = server
    if "itl_ms_mean" not in server:
        return
    client_ms, server_ms = result["client_itl_ms_mean"], server["itl_ms_mean"]
    result["server_itl_ms_mean"] = server_ms
    agreement = abs(client_ms - server_ms) / server_ms
    result["server_agreement"] = agreement
    if agreement > SERVER_DISAGREEMENT_WARN:
        warnings.append(f"client mean ITL {client_ms:.3f} ms and server mean ITL "
                        f"{server_ms:.3f} ms differ by {agreement:.0%}")
        result["suspect"] = True


def check_with_server(result: dict, server: dict, warnings: list[str]) -> bool:
    """compare_with_server, then, beyond SERVER_DISAGREEMENT_WARN, every clean sample flagged
    `server_disagrees`; True when they were."""
    compare_with_server(result, server, warnings)
    if result.get("server_agreement", 0) <= SERVER_DISAGREEMENT_WARN:
        return False
    _flag_server_disagreement(result)
    return True


def _flag_server_disagreement(result: dict) -> None:
    """The engine's own ITL contradicts the client's timing (an API server starved during the
    decode, say, then writing what it buffered at its own pace, too slowly apart to look like
    one burst): which repeat is wrong cannot be told from the server's totals, so every clean
    sample is flagged `server_disagrees` and kept out of every statistic downstream."""
    for s in result["samples"]:
        if not s["flag"]:
            s["flag"] = "server_disagrees"
    result["repeats_clean"] = 0
    result["warnings"].append("every repeat flagged server_disagrees: the client's timing contradicts the "
                              "engine's own inter-token latency")


def server_sample(r: dict) -> dict:
    """The engine's mean ITL over this repeat (/metrics), vLLM's per-request timings (final usage
    chunk, `--enable-per-request-metrics`), and the server-side decode tok/s of that one request:
    (n - 1) / generation_time (first to last token)."""
    out = {"server_itl_ms": r["server_itl_ms"]} if "server_itl_ms" in r else {}
    m = r["server_request_metrics"]
    if not m:
        return out
    out["server_request_metrics"] = m
    gen_ms = m.get("generation_time_ms")
    if isinstance(gen_ms, (int, float)) and gen_ms > 0:
        out["server_decode_tok_s"] = (r["n_tokens"] - 1) / (gen_ms / 1e3)
    return out


def server_block(before: dict, after: dict, runs: list[dict], repeats: int, warnings: list[str]) -> dict | None:
    """The server's own figures over the measured repeats (deltas of its histograms), or None."""
    if not (before.get("available") and after.get("available")):
        return None
    server: dict[str, Any] = {}
    d = hist_delta(before, after, "itl")
    if d and d[1] > 0:
        server["itl_metric"] = after["histograms"]["itl"]["metric"]
        server["itl_ms_mean"] = d[0] / d[1] * 1e3
        server["itl_count"] = d[1]
    d = hist_delta(before, after, "request_decode_time")
    if d and d[1] > 0:
        server["requests"] = d[1]
        server["decode_time_s_mean"] = d[0] / d[1]
        if d[1] == repeats and d[0] > 0:
            server["decode_tok_s"] = sum(r["n_tokens"] - 1 for r in runs) / d[0]
        elif d[1] != repeats:
            warnings.append(f"server counted {d[1]:g} finished requests during {repeats} measured "
                            "repeats (other traffic?): server figures are not comparable")
    d = hist_delta(before, after, "ttft")
    if d and d[1] > 0:
        server["ttft_ms_mean"] = d[0] / d[1] * 1e3
    return server

