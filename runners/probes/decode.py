"""Decode probe: single-request, greedy, streamed decode throughput against vLLM's
OpenAI-compatible `POST /v1/completions`.

What is measured (one request at a time; `warmup` unmeasured requests first):

- Each request is streamed (SSE). Every network read is timestamped with
  `time.perf_counter()` when it arrives; every SSE event completed by that read gets that
  arrival time.
- The timed request is the one a user sends: no `logprobs` (computing them at all costs
  about 2% of decode speed on vLLM 0.24 / H200; logprobs are asked for only by the separate
  correctness request, runners.probes.correctness.greedy_completion).
- Tokens are counted EXACTLY, per chunk, from every source the server gives and the sources
  must agree (else ProbeError): `choices[0].token_ids` (vLLM, `return_token_ids: true`) and the
  delta of the cumulative `usage.completion_tokens` (`stream_options.continuous_usage_stats`,
  which costs nothing measurable); `len(choices[0].logprobs.tokens)` too if a server sends
  logprobs unasked. A chunk may carry several tokens
  (vLLM `--stream-interval`, or outputs merged while the API server lags); the final usage-only
  chunk (`choices: []`) carries none, and its total must equal the count.
- TTFT = arrival of the first chunk carrying a token - the moment the request was sent.
- Decode tok/s = tokens that arrived AFTER the first token chunk / (t_last - t_first), i.e.
  (n_tokens - k_first) / (t_last - t_first), tokens counted at their chunk's arrival time.
  vLLM always sends the first token alone (v1 OutputProcessor: "It is the first token" is
  a send condition even with stream_interval > 1), so k_first == 1 and this is exactly
  (n_tokens - 1) / (t_last - t_first); when a server bundles the first token with others,
  the bundled ones did not take any decode time inside the window and are not counted.
- Inter-token latency: a chunk carrying k tokens that arrives g seconds after the previous
  token chunk contributes k samples of g / k (the tokens are assumed evenly spread over the
  gap; the client cannot know better). So mean ITL == 1 / decode tok/s exactly, and with
  stream_interval k the ITL percentiles describe per-token latency, not per-chunk latency
  (vLLM's `bench serve` reports per-chunk ITL; divide-by-k is comparable to its TPOT).
  ITL p50/p90/p99 are pooled over all measured repeats.
- Summary over repeats: median tok/s and TTFT, and a distribution-free order-statistic CI of
  the median tok/s (runners.analysis.stats.median_ci).
- Server cross-check: when GET /metrics answers, vLLM's own Prometheus histograms are read
  before and after the measured repeats; the mean of `vllm:inter_token_latency_seconds`
  (per engine step, engine-side timestamps) over that window is compared with the client's
  mean ITL, and `vllm:request_decode_time_seconds` gives the server's decode tok/s.
- Held-back start: when a server (or a proxy) does not set TCP_NODELAY, its first small
  writes wait for the client's delayed ACK (about 40 ms on loopback) and then arrive in one
  burst, so the first chunk's arrival is late and the burst's tokens look decoded in no
  time (+17% at 2 ms/token with a first token after 5 ms). Such a burst is a run of chunks
  from the first that arrived together, far faster than the stream's pace, with a first chunk
  late against the pace after it (steady_window): the
  decode window then starts at the second chunk after it (the first may still wait for the
  burst's ACK) and counts only the tokens after that chunk. Likewise a burst at the very end
  moves the window's end back. A pace that drifts along the stream has no such run and is timed
  whole. A repeat whose remaining window is too short (< HELD_MIN_WINDOW_TOKENS) is flagged
  `held_back` instead of being measured. The window's ends are recorded per sample
  (`held_back`), beside the whole stream's rate (`whole_stream_tok_s`), and the TTFT of such a
  repeat (late by the hold) is flagged too.
- The engine's own view of each repeat: while /metrics answers it is read between repeats, and
  each sample carries the engine's mean ITL over its request (`server_itl_ms`).
- The host: before each repeat a fixed loop is timed and the CPU time stolen by a hypervisor is
  read (runners.probes.host; `host_loop_ms`, `host_steal` per sample, `host` in the result).
  When the repeats spread by more than 5% while the host's speed varied beyond its limits,
  `warnings` says so: an eager engine is launch-bound and follows the host's CPU, so such a
  run's spread is the host's (a CUDA-graph decode keeps its pace: 0.02% on an H200 whose loop
  time doubled).
- Trap seen on CPU engines (docs/engine-notes.md): every chunk can arrive at once at the end, making the
  client tok/s absurd. Such repeats are flagged `suspect` ("burst"), kept out of every
  statistic, and reported in `warnings` (as is disagreement with the server).
- Flags: each sample carries `flag` ('' clean, else `burst` / `held_back` / `no_rate`, or
  `server_disagrees` on every clean one when the client's mean ITL and the engine's differ by
  more than SERVER_DISAGREEMENT_WARN: then the client's timing is not the engine's), and
  `ttft_flag` likewise. Medians, CI, mean, ITL pool and TTFT use clean repeats only. When
  fewer than min(3, repeats) clean repeats remain, up to MAX_EXTRA_REPEATS more requests are
  made; if still none is clean, the result is `suspect` and its figures come from the
  flagged repeats, said so in `warnings` (never silently).

The parts, one job each: runners.probes.streamed_request (one streamed request, its tokens
counted), runners.probes.steady_window (a repeat's timing, window and flags; pure),
runners.probes.server_check (the engine's own figures against the client's) and this module
(the repeat loop and the summary over repeats).

Bad input raises ProbeError (never a number): no answer (connect/read timeout), HTTP error
status (body included), stream closed before `max_tokens` tokens or without `data: [DONE]`,
malformed SSE JSON, an error object in the stream, zero tokens, inconsistent token counts.
"""
from __future__ import annotations

import hashlib
import math

import httpx

from runners.analysis import stats
from runners.probes import host
from runners.probes.client import CompletionClient, ProbeError  # noqa: F401 (ProbeError: public here too)
from runners.probes.metrics import hist_delta, scrape_server_metrics, settled_metrics  # noqa: F401
from runners.probes.server_check import check_with_server, server_block, server_sample
from runners.probes.steady_window import analyze_repeat
from runners.probes.streamed_request import request_body, stream_once

DEFAULT_PROMPT = (
    "The history of computing is a story of machines that learned to count, then to "
    "calculate, and finally to reason about the world in ways their builders never imagined."
)

# Clean repeats wanted (at most `repeats`) and the extra requests allowed to get them.
MIN_CLEAN_REPEATS = 3
MAX_EXTRA_REPEATS = 5


def _digest(ids: list[int] | None, text: str) -> str:
    payload = ",".join(str(i) for i in ids) if ids is not None else "text:" + text
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def measure_decode(*, base_url: str, model: str, prompt: str = DEFAULT_PROMPT, max_tokens: int,
                   repeats: int, warmup: int = 1, timeout_s: float = 120,
                   client: httpx.Client | None = None, fresh_prefix: bool = False) -> dict:
    """Measure single-request streamed greedy decode. See the module doc for definitions.

    `timeout_s` bounds each wait on the server (connect, and each network read of the stream):
    a server silent for that long is a ProbeError. Returns a JSON-able dict.
    """
    if max_tokens < 2:
        raise ValueError("max_tokens must be >= 2 to measure decode (the first token is prefill)")
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    body = request_body(model, prompt, max_tokens, fresh_prefix)
    with CompletionClient(base_url, timeout_s=timeout_s, client=client) as api:
        for _ in range(warmup):
            stream_once(api, body, timeout_s)
        before = scrape_server_metrics(api, model=model)
        runs, after, host_samples = _measured_repeats(api, body, timeout_s, repeats, model, before)
    warnings: list[str] = []
    server = server_block(before, after, runs, len(runs), warnings)
    used = _usable_runs(runs, server, warnings, repeats)
    result = summarize(runs, used, warnings, base=api.base_url, model=model, max_tokens=max_tokens,
                      repeats=repeats, warmup=warmup)
    result["server_metrics_available"] = bool(before["available"] and after.get("available"))
    result["host"] = host.summary(host_samples, [r["decode_tok_s"] for r in used])
    if result["host"]["unsteady"]:
        warnings.append(result["host"]["unsteady"])
    if server is None:
        result["server_metrics_error"] = after.get("error") or before.get("error")
    else:
        check_with_server(result, server, warnings)
    return jsonable(result)


def _measured_repeats(api: CompletionClient, body: dict, timeout_s: float, repeats: int, model: str,
                      before: dict) -> tuple[list[dict], dict, list[dict]]:
    """REPEATS measured requests, plus up to MAX_EXTRA_REPEATS more while fewer than
    min(MIN_CLEAN_REPEATS, repeats) of them are clean. While /metrics answers, it is read after
    each request (between requests, never during one), which gives each repeat the engine's
    own mean ITL (`server_itl_ms`). The host is sampled before each request and after the last
    (runners.probes.host). Returns the repeats, the last scrape and the host samples."""
    want = min(MIN_CLEAN_REPEATS, repeats)
    runs: list[dict] = []
    scrape = before
    samples = [host.sample()]
    while len(runs) < repeats or (sum(not r["flag"] for r in runs) < want
                                  and len(runs) < repeats + MAX_EXTRA_REPEATS):
        run = analyze_repeat(stream_once(api, body, timeout_s))
        samples.append(host.sample())
        run["host_loop_ms"] = samples[-2]["loop_ms"]
        run["host_steal"] = host.steal_between(samples[-2], samples[-1])
        if scrape["available"]:
            after = settled_metrics(api, model, scrape, 1)
            d = hist_delta(scrape, after, "itl") if after["available"] else None
            run["server_itl_ms"] = d[0] / d[1] * 1e3 if d and d[1] > 0 else None
            scrape = after
        runs.append(run)
    return runs, scrape, samples


def held_back_notes(runs: list[dict]) -> list[str]:
    """What the steady window left out of each repeat that had bursts (measured, not flagged)."""
    return [f"repeat {i}: {h['start_chunks']} leading and {h['end_chunks']} trailing chunks arrived in "
            f"bursts (held back): rate over the {h['window_tokens']} tokens that arrived at their own pace"
            for i, r in enumerate(runs) if (h := r["held_back"]) and not r["flag"]]


def _usable_runs(runs: list[dict], server: dict | None, warnings: list[str], repeats: int) -> list[dict]:
    """The repeats the statistics use: the clean ones; when none is clean, every one with a
    rate, and the result says so (ProbeError if not even one has a rate)."""
    for i, r in enumerate(runs):
        if r["flag"]:
            warnings.append(f"repeat {i}: {r['suspect']}")
    if len(runs) > repeats:
        warnings.append(f"{len(runs) - repeats} extra repeat(s) made to get clean ones "
                        f"(limit {MAX_EXTRA_REPEATS})")
    clean = [r for r in runs if not r["flag"]]
    used = clean if clean else [r for r in runs if r["decode_tok_s"] is not None]
    if not used:
        raise ProbeError(
            "no repeat gave a measurable decode rate (all chunks arrived at once at the end?): "
            + "; ".join(warnings),
            received={"repeats": [{k: r[k] for k in ("n_tokens", "chunks", "ttft_ms", "decode_window_ms", "suspect")}
                                  for r in runs],
                      "server_metrics": server})
    if not clean:
        warnings.append(f"no clean repeat in {len(runs)}: the figures come from flagged repeats")
    elif len(used) < len(runs):
        warnings.append(f"statistics use {len(used)} of {len(runs)} repeats (flagged ones excluded)")
    return used


def _outputs_identical(runs: list[dict]) -> bool:
    id_lists = [r["ids"] for r in runs]
    if all(x is not None for x in id_lists):
        return all(x == id_lists[0] for x in id_lists)
    return all(r["text"] == runs[0]["text"] for r in runs)


def summarize(runs: list[dict], used: list[dict], warnings: list[str], **request) -> dict:
    """The result dict: statistics over USED, pooled ITL percentiles, the first repeat's output."""
    tok_s = [r["decode_tok_s"] for r in used]
    itl_pool = [x for r in used for x in r["itl_s"]]
    ttft_used = [r for r in used if not r["ttft_flag"]]
    if not ttft_used:
        ttft_used = used
        warnings.append("every repeat's first chunk was held back: the TTFT includes the hold (a server or "
                        "proxy without TCP_NODELAY?), it is not the engine's")
    first = runs[0]
    identical = _outputs_identical(runs)
    if not identical:
        warnings.append("greedy outputs differ between repeats")
    ci = stats.median_ci(tok_s)
    itl_ms = {k: v * 1e3 for k, v in stats.percentiles(itl_pool).items()}
    itl_ms["mean"] = stats.mean(itl_pool) * 1e3
    itl_ms["n"] = len(itl_pool)
    return {
        "probe": "decode",
        "base_url": request["base"],
        "model": request["model"],
        "max_tokens": request["max_tokens"],
        "repeats": request["repeats"],
        "repeats_made": len(runs),
        "repeats_clean": sum(not r["flag"] for r in runs),
        "max_extra_repeats": MAX_EXTRA_REPEATS,
        "warmup": request["warmup"],
        "prompt_tokens": first["prompt_tokens"],
        "decode_tok_s": stats.median(tok_s),
        "decode_tok_s_ci": [ci[0], ci[1]],
        "decode_tok_s_ci_coverage": stats.median_ci_coverage(len(tok_s)),
        "decode_tok_s_mean": stats.mean(tok_s),
        "ttft_ms": stats.median([r["ttft_ms"] for r in ttft_used]),
        "itl_ms": itl_ms,
        "samples": [sample_entry(r) for r in runs],
        "token_count_sources": first["count_sources"],
        "output_token_ids": first["ids"],
        "output_digest": _digest(first["ids"], first["text"]),
        "output_text": first["text"],
        "repeat_outputs_identical": identical,
        "client_itl_ms_mean": itl_ms["mean"],
        "warnings": warnings,
        "notes": held_back_notes(runs),
        "suspect": all(r["flag"] for r in runs),  # no clean repeat at all
    }


def sample_entry(r: dict) -> dict:
    keys = ("decode_tok_s", "whole_stream_tok_s", "ttft_ms", "n_tokens", "chunks", "first_chunk_tokens",
            "max_chunk_tokens", "decode_window_ms", "held_back", "flag", "ttft_flag", "suspect", "host_loop_ms",
            "host_steal")
    return {**{k: r[k] for k in keys}, **server_sample(r)}



def jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    return x
