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
    "count"}}, "generation_tokens": float|None}.
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
    return {"available": True, "error": None, "histograms": histograms, "generation_tokens": gen}


def hist_delta(before: dict, after: dict, key: str) -> tuple[float, float] | None:
    """(sum, count) that histogram KEY gained between two scrapes, or None if either lacks it."""
    b = before.get("histograms", {}).get(key)
    a = after.get("histograms", {}).get(key)
    if not a or not b:
        return None
    return a["sum"] - b["sum"], a["count"] - b["count"]


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
