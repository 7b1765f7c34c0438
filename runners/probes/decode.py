"""Decode probe: single-request, greedy, streamed decode throughput against vLLM's
OpenAI-compatible `POST /v1/completions`.

What is measured (one request at a time; `warmup` unmeasured requests first):

- Each request is streamed (SSE). Every network read is timestamped with
  `time.perf_counter()` when it arrives; every SSE event completed by that read gets that
  arrival time.
- Tokens are counted EXACTLY, per chunk, from every source the server gives and the sources
  must agree (else ProbeError): `choices[0].token_ids` (vLLM, `return_token_ids: true`), the
  delta of the cumulative `usage.completion_tokens` (`stream_options.continuous_usage_stats`),
  and `len(choices[0].logprobs.tokens)` (`logprobs: 1`). A chunk may carry several tokens
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
- Trap from ENGINE-NOTES: sometimes every chunk arrives at once at the end, which makes the
  client tok/s absurd. Such repeats are flagged `suspect`, excluded from the medians when
  clean repeats exist, and reported in `warnings` (as is disagreement with the server).

Bad input raises ProbeError (never a number): no answer (connect/read timeout), HTTP error
status (body included), stream closed before `max_tokens` tokens or without `data: [DONE]`,
malformed SSE JSON, an error object in the stream, zero tokens, inconsistent token counts.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

import httpx

from runners.analysis import stats
from runners.probes.client import CompletionClient, ProbeError, clip  # noqa: F401 (ProbeError: public here too)
from runners.probes.metrics import hist_delta, scrape_server_metrics, settled_metrics  # noqa: F401

DEFAULT_PROMPT = (
    "The history of computing is a story of machines that learned to count, then to "
    "calculate, and finally to reason about the world in ways their builders never imagined."
)

# Absurd-arrival detection (see module doc): a repeat is "burst" when its token chunks arrive
# (median gap) closer together than any engine decodes one request, or when they are
# sub-millisecond apart and median gap x chunks is a tiny fraction of the wait for the first.
BURST_MEDIAN_GAP_S = 50e-6
BURST_WINDOW_FRACTION = 0.05
BURST_WINDOW_MEDIAN_GAP_S = 1e-3
BURST_MIN_CHUNKS = 4
# Client vs server mean ITL: relative difference above which a warning is raised.
SERVER_DISAGREEMENT_WARN = 0.25

# --------------------------------------------------------------------------------------------
# one streamed request


def _request_body(model: str, prompt: str, max_tokens: int) -> dict:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "n": 1,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_token_ids": True,
        "logprobs": 1,
    }


class _Tally:
    """What one streamed completion carried so far: token chunks, counts, usage, finish reason."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.chunks: list[dict] = []  # token-carrying chunks: {"t", "k", "ids", "text", "logprobs"}
        self.n_tokens = 0
        self.prev_usage: int | None = None
        self.final_usage: dict | None = None
        self.finish_reason = None
        self.server_request_metrics = None
        self.count_sources: set[str] = set()

    def so_far(self) -> str:
        return f"{self.n_tokens} of {self.max_tokens} tokens received in {len(self.chunks)} chunks"

    def add(self, t: float, obj: dict, index: int) -> None:
        """Count the tokens of one SSE event that arrived at T."""
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise ProbeError(f"SSE event #{index} has no 'choices' list", received=_raw(obj))
        usage = obj.get("usage")
        if not choices:  # the final usage-only chunk: carries no token
            if usage is not None:
                self.final_usage = usage
            if isinstance(obj.get("metrics"), dict):
                self.server_request_metrics = obj["metrics"]
            return
        if len(choices) != 1 or not isinstance(choices[0], dict):
            raise ProbeError(f"expected one choice object per chunk, got {len(choices)}", received=_raw(obj))
        ch = choices[0]
        k = self._count(ch, usage, obj)
        if ch.get("finish_reason") is not None:
            self.finish_reason = ch["finish_reason"]
        if k == 0:
            return
        self.n_tokens += k
        lp = ch.get("logprobs")
        self.chunks.append({"t": t, "k": k, "ids": ch.get("token_ids"), "text": ch.get("text") or "",
                            "logprobs": lp if isinstance(lp, dict) else None})

    def _count(self, ch: dict, usage, obj: dict) -> int:
        """Tokens in this chunk, from every source the server gave; the sources must agree."""
        counts: dict[str, int] = {}
        ids = ch.get("token_ids")
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(x, int) for x in ids):
                raise ProbeError("token_ids is not a list of integers", received=_raw(obj))
            counts["token_ids"] = len(ids)
        usage_ct = usage.get("completion_tokens") if isinstance(usage, dict) else None
        if isinstance(usage_ct, int):
            counts["usage"] = usage_ct - (self.prev_usage or 0)
            self.prev_usage = usage_ct
        lp = ch.get("logprobs")
        if isinstance(lp, dict) and isinstance(lp.get("tokens"), list):
            counts["logprobs"] = len(lp["tokens"])
        if len(set(counts.values())) > 1:
            raise ProbeError(f"token counts disagree within one chunk: {counts} ({self.so_far()})",
                             received=_raw(obj))
        if not counts:  # nothing to count with: one token per non-empty text chunk (approximate)
            self.count_sources.add("text-chunks(approximate)")
            return 1 if ch.get("text") else 0
        self.count_sources.update(counts)
        k = next(iter(counts.values()))
        if k < 0:
            raise ProbeError(f"usage.completion_tokens went backwards ({self.so_far()})", received=_raw(obj))
        return k


def _raw(obj: dict) -> str:
    return clip(json.dumps(obj))


def _stream_once(api: CompletionClient, body: dict, timeout_s: float) -> dict:
    """Send one request, read the whole stream. Returns the raw record of the repeat."""
    tally = _Tally(body["max_tokens"])
    t_send = time.perf_counter()
    with api.stream_completion(body, timeout_s=timeout_s, progress=tally.so_far) as stream:
        for t, obj in stream:
            tally.add(t, obj, stream.events)
    _check_complete(tally, stream, api.url("/v1/completions"))
    return {
        "t_send": t_send,
        "chunks": tally.chunks,
        "n_tokens": tally.n_tokens,
        "finish_reason": tally.finish_reason,
        "prompt_tokens": (tally.final_usage or {}).get("prompt_tokens"),
        "count_sources": sorted(tally.count_sources),
        "server_request_metrics": tally.server_request_metrics,
    }


def _check_complete(tally: _Tally, stream, url: str) -> None:
    """Exactly max_tokens tokens and a [DONE], else ProbeError saying how far it got."""
    n, so_far = tally.n_tokens, tally.so_far()
    received = {"events": stream.events, "tokens": n, "chunks": len(tally.chunks), "saw_done": stream.saw_done,
                "finish_reason": tally.finish_reason, "final_usage": tally.final_usage}
    if n == 0:
        raise ProbeError(f"zero tokens received from POST {url} ({stream.events} SSE events)", received=received)
    if not stream.saw_done:
        raise ProbeError(f"stream closed early without [DONE]: {so_far}", received=received)
    if n > tally.max_tokens:
        raise ProbeError(f"more tokens than asked for: {so_far}", received=received)
    if n < tally.max_tokens:
        raise ProbeError(f"stream closed early: {so_far} (finish_reason={tally.finish_reason!r}; "
                         f"ignore_eos should give exactly max_tokens)", received=received)
    usage_total = (tally.final_usage or {}).get("completion_tokens")
    if usage_total not in (None, n):
        raise ProbeError(f"final usage says {usage_total} completion tokens, chunks carried {n}", received=received)


def _analyze(rec: dict) -> dict:
    """Timing of one repeat from its raw record."""
    chunks = rec["chunks"]
    t_send = rec["t_send"]
    t_first, k_first = chunks[0]["t"], chunks[0]["k"]
    t_last = chunks[-1]["t"]
    n = rec["n_tokens"]
    itl: list[float] = []
    gaps: list[float] = []
    for prev, cur in zip(chunks, chunks[1:]):
        g = cur["t"] - prev["t"]
        gaps.append(g)
        itl.extend([g / cur["k"]] * cur["k"])
    window = t_last - t_first
    decode_tok_s = (n - k_first) / window if (n - k_first) > 0 and window > 0 else None
    if decode_tok_s is None:
        suspect = "all tokens arrived in a single network read"
    else:
        suspect = _burst(chunks, gaps, t_first - t_send)
    ids, logprobs = _ids_of(chunks), _logprobs_of(chunks)
    return {
        "decode_tok_s": decode_tok_s,
        "ttft_ms": (t_first - t_send) * 1e3,
        "n_tokens": n,
        "chunks": len(chunks),
        "first_chunk_tokens": k_first,
        "max_chunk_tokens": max(c["k"] for c in chunks),
        "decode_window_ms": window * 1e3,
        "itl_s": itl,
        "suspect": suspect,
        "ids": ids,
        "text": "".join(c["text"] for c in chunks),
        "logprobs": logprobs,
        "server_request_metrics": rec["server_request_metrics"],
        "prompt_tokens": rec["prompt_tokens"],
        "count_sources": rec["count_sources"],
    }


def _burst(chunks: list[dict], gaps: list[float], ttft: float) -> str | None:
    """Why the arrivals look held back and released at once (see the module doc), or None."""
    if len(chunks) < BURST_MIN_CHUNKS:
        return None
    med_gap = stats.median(gaps)
    # the decode window the typical gap implies (robust to one stall inside a burst)
    implied_window = med_gap * (len(chunks) - 1)
    if med_gap < BURST_MEDIAN_GAP_S or (med_gap < BURST_WINDOW_MEDIAN_GAP_S
                                        and implied_window < BURST_WINDOW_FRACTION * ttft):
        return (f"burst: {len(chunks)} chunks arrived {med_gap * 1e6:.1f} us apart (median) after a "
                f"{ttft * 1e3:.1f} ms wait for the first; the stream was held back, so client "
                "timestamps do not reflect decode")
    return None


def _ids_of(chunks: list[dict]) -> list[int] | None:
    """All token ids in order, or None when any chunk lacked them."""
    if any(c["ids"] is None for c in chunks):
        return None
    return [i for c in chunks for i in c["ids"]]


def _logprobs_of(chunks: list[dict]) -> list[dict] | None:
    """[{"token", "logprob", "top_logprobs"}] per token, or None when any chunk lacked logprobs."""
    out = []
    for c in chunks:
        lp = c["logprobs"]
        if not lp:
            return None
        toks = lp.get("tokens") or []
        tlps = lp.get("token_logprobs") or []
        tops = lp.get("top_logprobs") or []
        for i, tok in enumerate(toks):
            out.append({"token": tok,
                        "logprob": tlps[i] if i < len(tlps) else None,
                        "top_logprobs": tops[i] if i < len(tops) else None})
    return out


def _digest(ids: list[int] | None, text: str) -> str:
    payload = ",".join(str(i) for i in ids) if ids is not None else "text:" + text
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def measure_decode(*, base_url: str, model: str, prompt: str = DEFAULT_PROMPT, max_tokens: int,
                   repeats: int, warmup: int = 1, timeout_s: float = 120,
                   client: httpx.Client | None = None) -> dict:
    """Measure single-request streamed greedy decode. See the module doc for definitions.

    `timeout_s` bounds each wait on the server (connect, and each network read of the stream):
    a server silent for that long is a ProbeError. Returns a JSON-able dict.
    """
    if max_tokens < 2:
        raise ValueError("max_tokens must be >= 2 to measure decode (the first token is prefill)")
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    body = _request_body(model, prompt, max_tokens)
    with CompletionClient(base_url, timeout_s=timeout_s, client=client) as api:
        for _ in range(warmup):
            _stream_once(api, body, timeout_s)
        before = scrape_server_metrics(api, model=model)
        runs = [_analyze(_stream_once(api, body, timeout_s)) for _ in range(repeats)]
        after = settled_metrics(api, model, before, repeats) if before["available"] else before
    warnings: list[str] = []
    server = _server_block(before, after, runs, repeats, warnings)
    used = _usable_runs(runs, server, warnings)
    result = _summary(runs, used, warnings, base=api.base_url, model=model, max_tokens=max_tokens,
                      repeats=repeats, warmup=warmup)
    result["server_metrics_available"] = bool(before["available"] and after.get("available"))
    if server is None:
        result["server_metrics_error"] = after.get("error") or before.get("error")
    else:
        _compare_with_server(result, server, warnings)
    return _jsonable(result)


def _usable_runs(runs: list[dict], server: dict | None, warnings: list[str]) -> list[dict]:
    """The repeats the medians use: the clean ones, else every one with a rate (ProbeError if none)."""
    for i, r in enumerate(runs):
        if r["suspect"]:
            warnings.append(f"repeat {i}: {r['suspect']}")
    clean = [r for r in runs if not r["suspect"]]
    used = clean if clean else [r for r in runs if r["decode_tok_s"] is not None]
    if not used:
        raise ProbeError(
            "no repeat gave a measurable decode rate (all chunks arrived at once at the end?): "
            + "; ".join(warnings),
            received={"repeats": [{k: r[k] for k in ("n_tokens", "chunks", "ttft_ms", "decode_window_ms", "suspect")}
                                  for r in runs],
                      "server_metrics": server})
    if len(used) < len(runs):
        warnings.append(f"medians use {len(used)} of {len(runs)} repeats (suspect ones excluded)")
    return used


def _outputs_identical(runs: list[dict]) -> bool:
    id_lists = [r["ids"] for r in runs]
    if all(x is not None for x in id_lists):
        return all(x == id_lists[0] for x in id_lists)
    return all(r["text"] == runs[0]["text"] for r in runs)


def _summary(runs: list[dict], used: list[dict], warnings: list[str], **request) -> dict:
    """The result dict: medians over USED, pooled ITL percentiles, the first repeat's output."""
    tok_s = [r["decode_tok_s"] for r in used]
    itl_pool = [x for r in used for x in r["itl_s"]]
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
        "warmup": request["warmup"],
        "prompt_tokens": first["prompt_tokens"],
        "decode_tok_s": stats.median(tok_s),
        "decode_tok_s_ci": [ci[0], ci[1]],
        "decode_tok_s_ci_coverage": stats.median_ci_coverage(len(tok_s)),
        "decode_tok_s_mean": stats.mean(tok_s),
        "ttft_ms": stats.median([r["ttft_ms"] for r in used]),
        "itl_ms": itl_ms,
        "samples": [_sample(r) for r in runs],
        "token_count_sources": first["count_sources"],
        "output_token_ids": first["ids"],
        "output_digest": _digest(first["ids"], first["text"]),
        "output_text": first["text"],
        "logprobs": first["logprobs"],
        "repeat_outputs_identical": identical,
        "client_itl_ms_mean": itl_ms["mean"],
        "warnings": warnings,
        "suspect": all(r["suspect"] for r in runs),  # no clean repeat at all
    }


def _sample(r: dict) -> dict:
    keys = ("decode_tok_s", "ttft_ms", "n_tokens", "chunks", "first_chunk_tokens", "max_chunk_tokens",
            "decode_window_ms", "suspect")
    return {**{k: r[k] for k in keys}, **_server_sample(r)}


def _compare_with_server(result: dict, server: dict, warnings: list[str]) -> None:
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


def _server_sample(r: dict) -> dict:
    """vLLM's per-request timings (final usage chunk, `--enable-per-request-metrics`), and the
    server-side decode tok/s of that one request: (n - 1) / generation_time (first to last token)."""
    m = r["server_request_metrics"]
    if not m:
        return {}
    out = {"server_request_metrics": m}
    gen_ms = m.get("generation_time_ms")
    if isinstance(gen_ms, (int, float)) and gen_ms > 0:
        out["server_decode_tok_s"] = (r["n_tokens"] - 1) / (gen_ms / 1e3)
    return out


def _server_block(before: dict, after: dict, runs: list[dict], repeats: int, warnings: list[str]) -> dict | None:
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


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x
