"""vLLM's own Prometheus `/metrics`: the histograms the decode probe cross-checks against.

Parsed with prometheus_client's text parser. Series are summed over label sets (engines);
with `model`, series whose `model_name` label differs are ignored.
"""
from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from runners.probes.client import CompletionClient, clip

# Histograms read from vLLM (names checked against vllm/v1/metrics/loggers.py, vLLM 0.32):
# the first name present in each tuple is used (older vLLM: time_per_output_token_seconds).
HISTOGRAMS = {
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "request_decode_time": ("vllm:request_decode_time_seconds",),
    "request_time_per_output_token": ("vllm:request_time_per_output_token_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
}
GENERATION_TOKENS = "vllm:generation_tokens_total"
# Counters of prompt tokens looked up in and served from the prefix cache (vLLM V1; they do not
# move where prefix caching is off): how the primed streams' prompts were served.
COUNTERS = {"prefix_cache_queries": "vllm:prefix_cache_queries_total",
            "prefix_cache_hits": "vllm:prefix_cache_hits_total"}
# How long to wait for the server's histograms to include the last measured request.
METRICS_SETTLE_S = 2.0


def sample_totals(text: str, model: str | None = None) -> dict[str, float]:
    """Prometheus text exposition -> {sample name: value summed over label sets}.
    Raises ValueError for text that is not the exposition format."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if model is not None and sample.labels.get("model_name", model) != model:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def histograms_of(totals: dict[str, float]) -> dict[str, dict]:
    """{key: {"metric", "sum", "count"}} for the HISTOGRAMS present in TOTALS."""
    found = {}
    for key, names in HISTOGRAMS.items():
        for metric in names:
            if metric + "_count" in totals:
                found[key] = {"metric": metric, "sum": totals.get(metric + "_sum", 0.0),
                              "count": totals[metric + "_count"]}
                break
    return found


def scrape_server_metrics(api: CompletionClient, *, model: str | None = None, timeout_s: float = 5.0) -> dict:
    """Read vLLM's `/metrics`. Never raises: on failure `available` is False and `error` says why.

    Returns {"available": bool, "error": str|None, "histograms": {key: {"metric", "sum",
    "count"}}, "generation_tokens": float|None, "counters": {key of COUNTERS: value}}.
    """
    url = api.url("/metrics")
    try:
        resp = api.get("/metrics", timeout_s=timeout_s)
    except httpx.HTTPError as e:
        return {"available": False, "error": f"GET {url}: {type(e).__name__}: {e}"}
    if resp.status_code != 200:
        return {"available": False, "error": f"GET {url}: HTTP {resp.status_code}: {clip(resp.text, 300)}"}
    try:
        totals = sample_totals(resp.text, model)
    except ValueError as e:
        return {"available": False, "error": f"GET {url}: not Prometheus text ({e})"}
    histograms = histograms_of(totals)
    gen = totals.get(GENERATION_TOKENS)
    if not histograms and gen is None:
        return {"available": False, "error": f"GET {url}: no vllm:* histograms in the answer"}
    counters = {key: totals[name] for key, name in COUNTERS.items() if name in totals}
    return {"available": True, "error": None, "histograms": histograms, "generation_tokens": gen, "counters": counters}


def hist_delta(before: dict, after: dict, key: str) -> tuple[float, float] | None:
    """(sum, count) that histogram KEY gained between two scrapes, or None if either lacks it."""
    b = before.get("histograms", {}).get(key)
    a = after.get("histograms", {}).get(key)
    if not a or not b:
        return None
    return a["sum"] - b["sum"], a["count"] - b["count"]


def counter_delta(before: dict, after: dict, key: str) -> float | None:
    """What counter KEY (of COUNTERS) gained between two scrapes, or None if either lacks it."""
    b, a = before.get("counters", {}).get(key), after.get("counters", {}).get(key)
    return None if a is None or b is None else a - b


def joined_windows(pairs: list[tuple[dict, dict]]) -> tuple[dict, dict]:
    """Scrapes (before, after) of several windows as one (before, after) pair whose deltas are the
    windows' deltas summed (histograms and COUNTERS): what was counted between the windows (the
    priming requests of a round, say) is left out. An unavailable scrape makes `after` that scrape."""
    first = pairs[0][0]
    for b, a in pairs:
        if not (b.get("available") and a.get("available")):
            return first, (a if not a.get("available") else b)
    after = {"available": True, "error": None, "histograms": {}, "counters": {}, "generation_tokens": None}
    for key, h in first["histograms"].items():
        deltas = [hist_delta(b, a, key) for b, a in pairs]
        if all(deltas):
            after["histograms"][key] = {"metric": h["metric"], "sum": h["sum"] + sum(d[0] for d in deltas),
                                        "count": h["count"] + sum(d[1] for d in deltas)}
    for key, value in first.get("counters", {}).items():
        deltas = [counter_delta(b, a, key) for b, a in pairs]
        if all(d is not None for d in deltas):
            after["counters"][key] = value + sum(deltas)
    return first, after


def settled_metrics(api: CompletionClient, model: str, before: dict, repeats: int) -> dict:
    """Scrape /metrics until the decode-time histogram counted the measured requests (vLLM
    records a finished request's stats asynchronously), or METRICS_SETTLE_S passed."""
    deadline = time.perf_counter() + METRICS_SETTLE_S
    while True:
        after = scrape_server_metrics(api, model=model)
        if not after["available"]:
            return after
        d = hist_delta(before, after, "request_decode_time")
        if d is None or d[1] >= repeats or time.perf_counter() > deadline:
            return after
        time.sleep(0.05)
