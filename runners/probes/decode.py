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
# How long to wait for the server's histograms to include the last measured request.
METRICS_SETTLE_S = 2.0

_RECEIVED_MAX = 2000  # characters of raw input kept in a ProbeError


class ProbeError(Exception):
    """The server's answer cannot be turned into a measurement. `received` holds what came back."""

    def __init__(self, message: str, received: Any = None):
        super().__init__(message)
        self.message = message
        self.received = received

    def to_dict(self) -> dict:
        return {"error": self.message, "received": self.received}


def _clip(text: str, limit: int = _RECEIVED_MAX) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


# --------------------------------------------------------------------------------------------
# /metrics


def _parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> [(name, labels, value)]. Comments and bad lines skipped."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        labels: dict[str, str] = {}
        brace = line.find("{")
        space = line.find(" ")
        if brace != -1 and (space == -1 or brace < space):
            name = line[:brace]
            i = brace + 1
            while i < len(line) and line[i] != "}":
                eq = line.find("=", i)
                if eq == -1 or eq + 1 >= len(line) or line[eq + 1] != '"':
                    break
                key = line[i:eq].strip().lstrip(",").strip()
                j = eq + 2
                buf = []
                while j < len(line) and line[j] != '"':
                    if line[j] == "\\" and j + 1 < len(line):
                        buf.append({"n": "\n"}.get(line[j + 1], line[j + 1]))
                        j += 2
                        continue
                    buf.append(line[j])
                    j += 1
                labels[key] = "".join(buf)
                i = j + 1
                while i < len(line) and line[i] in " ,":
                    i += 1
            rest = line[i + 1:].split()
        else:
            parts = line.split()
            name, rest = parts[0], parts[1:]
        if not rest:
            continue
        try:
            value = float(rest[0])
        except ValueError:
            continue
        out.append((name, labels, value))
    return out


# Histograms read from vLLM (names checked against vllm/v1/metrics/loggers.py, vLLM 0.32):
# the first name present in each tuple is used (older vLLM: time_per_output_token_seconds).
_HISTOGRAMS = {
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "request_decode_time": ("vllm:request_decode_time_seconds",),
    "request_time_per_output_token": ("vllm:request_time_per_output_token_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
}


def scrape_server_metrics(base_url: str, client: httpx.Client | None = None, *,
                          model: str | None = None, timeout_s: float = 5.0) -> dict:
    """Read vLLM's Prometheus `/metrics`. Never raises: on failure `available` is False.

    Returns {"available": bool, "error": str|None, "histograms": {key: {"metric", "sum",
    "count"}}, "generation_tokens": float|None}. Series are summed over label sets (engines);
    with `model`, series whose `model_name` label differs are ignored.
    """
    url = base_url.rstrip("/") + "/metrics"
    own = client is None
    c = client or httpx.Client(timeout=timeout_s, trust_env=False)
    try:
        try:
            resp = c.get(url, timeout=timeout_s)
        except httpx.HTTPError as e:
            return {"available": False, "error": f"GET {url}: {type(e).__name__}: {e}"}
        if resp.status_code != 200:
            return {"available": False, "error": f"GET {url}: HTTP {resp.status_code}: {_clip(resp.text, 300)}"}
        samples = _parse_prometheus(resp.text)
    finally:
        if own:
            c.close()

    totals: dict[str, float] = {}
    for name, labels, value in samples:
        if model is not None and "model_name" in labels and labels["model_name"] != model:
            continue
        totals[name] = totals.get(name, 0.0) + value

    histograms = {}
    for key, names in _HISTOGRAMS.items():
        for metric in names:
            if metric + "_count" in totals:
                histograms[key] = {"metric": metric, "sum": totals.get(metric + "_sum", 0.0),
                                   "count": totals[metric + "_count"]}
                break
    gen = totals.get("vllm:generation_tokens_total")
    if not histograms and gen is None:
        return {"available": False, "error": f"GET {url}: no vllm:* histograms in the answer"}
    return {"available": True, "error": None, "histograms": histograms, "generation_tokens": gen}


def _hist_delta(before: dict, after: dict, key: str) -> tuple[float, float] | None:
    b = before.get("histograms", {}).get(key)
    a = after.get("histograms", {}).get(key)
    if not a or not b:
        return None
    return a["sum"] - b["sum"], a["count"] - b["count"]


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


def _sse_events(response: httpx.Response):
    """Yield (arrival_time, data_string) per SSE event. The arrival time is perf_counter() at
    the network read that completed the event."""
    buf = b""
    for piece in response.iter_bytes():
        t = time.perf_counter()
        buf = (buf + piece).replace(b"\r\n", b"\n")  # whole buffer: a CRLF may straddle reads
        while True:
            end = buf.find(b"\n\n")
            if end == -1:
                break
            block, buf = buf[:end], buf[end + 2:]
            data_lines = []
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    v = line[5:]
                    data_lines.append(v[1:] if v.startswith(b" ") else v)
                # "event:", "id:", "retry:" and ":" comments carry nothing for us
            if data_lines:
                yield t, b"\n".join(data_lines).decode("utf-8", errors="replace")
    if buf.strip():
        # trailing bytes without the blank line that ends an event
        yield None, buf.decode("utf-8", errors="replace")


def _stream_once(client: httpx.Client, url: str, body: dict, timeout_s: float) -> dict:
    """Send one request, read the whole stream. Returns the raw record of the repeat."""
    max_tokens = body["max_tokens"]
    chunks: list[dict] = []  # token-carrying chunks: {"t", "k", "ids", "text", "logprobs"}
    n_tokens = 0
    prev_usage: int | None = None
    final_usage: dict | None = None
    finish_reason = None
    server_request_metrics = None
    saw_done = False
    events = 0
    count_sources: set[str] = set()
    t_send = time.perf_counter()

    def so_far() -> str:
        return f"{n_tokens} of {max_tokens} tokens received in {len(chunks)} chunks"

    try:
        with client.stream("POST", url, json=body, timeout=timeout_s) as resp:
            if resp.status_code != 200:
                text = resp.read().decode("utf-8", errors="replace")
                raise ProbeError(f"HTTP {resp.status_code} from POST {url}: {_clip(text, 1000)}",
                                 received={"status": resp.status_code, "body": _clip(text)})
            for t, data in _sse_events(resp):
                events += 1
                if t is None:
                    raise ProbeError(f"stream ended inside an SSE event ({so_far()})",
                                     received=_clip(data))
                if saw_done:
                    raise ProbeError("data after [DONE]", received=_clip(data))
                if data.strip() == "[DONE]":
                    saw_done = True
                    continue
                try:
                    obj = json.loads(data)
                except json.JSONDecodeError as e:
                    raise ProbeError(f"malformed SSE JSON in event #{events} ({e}; {so_far()})",
                                     received=_clip(data)) from None
                if not isinstance(obj, dict):
                    raise ProbeError(f"SSE event #{events} is not a JSON object", received=_clip(data))
                if "error" in obj:
                    raise ProbeError(f"server reported an error in the stream after {so_far()}: "
                                     f"{_clip(json.dumps(obj['error']), 500)}", received=_clip(data))
                choices = obj.get("choices")
                if not isinstance(choices, list):
                    raise ProbeError(f"SSE event #{events} has no 'choices' list", received=_clip(data))
                usage = obj.get("usage")
                usage_ct = usage.get("completion_tokens") if isinstance(usage, dict) else None
                if not choices:
                    # usage-only chunk (final): carries no token
                    if usage is not None:
                        final_usage = usage
                    if isinstance(obj.get("metrics"), dict):
                        server_request_metrics = obj["metrics"]
                    continue
                if len(choices) != 1:
                    raise ProbeError(f"expected one choice per chunk, got {len(choices)}", received=_clip(data))
                ch = choices[0]
                if not isinstance(ch, dict):
                    raise ProbeError("choice is not a JSON object", received=_clip(data))

                counts: dict[str, int] = {}
                ids = ch.get("token_ids")
                if ids is not None:
                    if not isinstance(ids, list) or not all(isinstance(x, int) for x in ids):
                        raise ProbeError("token_ids is not a list of integers", received=_clip(data))
                    counts["token_ids"] = len(ids)
                if isinstance(usage_ct, int):
                    counts["usage"] = usage_ct - (prev_usage or 0)
                    prev_usage = usage_ct
                lp = ch.get("logprobs")
                if isinstance(lp, dict) and isinstance(lp.get("tokens"), list):
                    counts["logprobs"] = len(lp["tokens"])
                if len(set(counts.values())) > 1:
                    raise ProbeError(f"token counts disagree within one chunk: {counts} ({so_far()})",
                                     received=_clip(data))
                if counts:
                    k = next(iter(counts.values()))
                    count_sources.update(counts)
                else:
                    # nothing to count with: one token per non-empty text chunk (approximate)
                    k = 1 if ch.get("text") else 0
                    count_sources.add("text-chunks(approximate)")
                if k < 0:
                    raise ProbeError(f"usage.completion_tokens went backwards ({so_far()})", received=_clip(data))
                if ch.get("finish_reason") is not None:
                    finish_reason = ch["finish_reason"]
                if k == 0:
                    continue
                n_tokens += k
                chunks.append({"t": t, "k": k, "ids": ids, "text": ch.get("text") or "",
                               "logprobs": lp if isinstance(lp, dict) else None})
    except httpx.TimeoutException as e:
        raise ProbeError(
            f"timeout: no answer from POST {url} within {timeout_s:g} s "
            f"({type(e).__name__}; {so_far()}, {events} SSE events)",
            received={"events": events, "tokens": n_tokens}) from None
    except httpx.ConnectError as e:
        raise ProbeError(f"cannot connect to {url}: {e}", received=None) from None
    except (httpx.RemoteProtocolError, httpx.ReadError) as e:
        raise ProbeError(
            f"stream closed early: {so_far()}, connection ended ({type(e).__name__}: {e})",
            received={"events": events, "tokens": n_tokens, "saw_done": saw_done}) from None
    except httpx.HTTPError as e:
        raise ProbeError(f"HTTP failure on POST {url}: {type(e).__name__}: {e} ({so_far()})",
                         received={"events": events, "tokens": n_tokens}) from None

    received = {"events": events, "tokens": n_tokens, "chunks": len(chunks), "saw_done": saw_done,
                "finish_reason": finish_reason, "final_usage": final_usage}
    if n_tokens == 0:
        raise ProbeError(f"zero tokens received from POST {url} ({events} SSE events)", received=received)
    if not saw_done:
        raise ProbeError(f"stream closed early without [DONE]: {so_far()}", received=received)
    if n_tokens > max_tokens:
        raise ProbeError(f"more tokens than asked for: {so_far()}", received=received)
    if n_tokens < max_tokens:
        raise ProbeError(f"stream closed early: {so_far()} (finish_reason={finish_reason!r}; "
                         f"ignore_eos should give exactly max_tokens)", received=received)
    if final_usage is not None and final_usage.get("completion_tokens") not in (None, n_tokens):
        raise ProbeError(f"final usage says {final_usage.get('completion_tokens')} completion tokens, "
                         f"chunks carried {n_tokens}", received=received)
    return {
        "t_send": t_send,
        "chunks": chunks,
        "n_tokens": n_tokens,
        "finish_reason": finish_reason,
        "prompt_tokens": (final_usage or {}).get("prompt_tokens"),
        "count_sources": sorted(count_sources),
        "server_request_metrics": server_request_metrics,
    }


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
    suspect = None
    if decode_tok_s is None:
        suspect = "all tokens arrived in a single network read"
    elif len(chunks) >= BURST_MIN_CHUNKS:
        med_gap = stats.median(gaps)
        ttft = t_first - t_send
        # the decode window the typical gap implies (robust to one stall inside a burst)
        implied_window = med_gap * (len(chunks) - 1)
        if med_gap < BURST_MEDIAN_GAP_S or (med_gap < BURST_WINDOW_MEDIAN_GAP_S
                                            and implied_window < BURST_WINDOW_FRACTION * ttft):
            suspect = (f"burst: {len(chunks)} chunks arrived {med_gap * 1e6:.1f} us apart (median) after a "
                       f"{ttft * 1e3:.1f} ms wait for the first; the stream was held back, so client "
                       "timestamps do not reflect decode")
    ids: list[int] | None = []
    for c in chunks:
        if c["ids"] is None:
            ids = None
            break
        ids.extend(c["ids"])
    logprobs = []
    for c in chunks:
        lp = c["logprobs"]
        if not lp:
            logprobs = None
            break
        toks = lp.get("tokens") or []
        tlps = lp.get("token_logprobs") or []
        tops = lp.get("top_logprobs") or []
        for i, tok in enumerate(toks):
            logprobs.append({"token": tok,
                             "logprob": tlps[i] if i < len(tlps) else None,
                             "top_logprobs": tops[i] if i < len(tops) else None})
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
    base = base_url.rstrip("/")
    url = base + "/v1/completions"
    body = _request_body(model, prompt, max_tokens)
    own = client is None
    # trust_env=False: the engine is addressed directly; a host's proxy settings must not apply.
    c = client or httpx.Client(timeout=httpx.Timeout(timeout_s), trust_env=False)
    try:
        for _ in range(warmup):
            _stream_once(c, url, body, timeout_s)
        before = scrape_server_metrics(base, c, model=model)
        runs = [_analyze(_stream_once(c, url, body, timeout_s)) for _ in range(repeats)]
        after = _settled_metrics(base, c, model, before, repeats) if before["available"] else before
    finally:
        if own:
            c.close()

    warnings: list[str] = []
    server = _server_block(before, after, runs, repeats, warnings)
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

    tok_s = [r["decode_tok_s"] for r in used]
    itl_pool = [x for r in used for x in r["itl_s"]]
    first = runs[0]
    id_lists = [r["ids"] for r in runs]
    if all(x is not None for x in id_lists):
        identical = all(x == id_lists[0] for x in id_lists)
    else:
        identical = all(r["text"] == first["text"] for r in runs)
    if not identical:
        warnings.append("greedy outputs differ between repeats")

    ci = stats.median_ci(tok_s)
    itl_ms = {k: v * 1e3 for k, v in stats.percentiles(itl_pool).items()}
    itl_ms["mean"] = stats.mean(itl_pool) * 1e3
    itl_ms["n"] = len(itl_pool)
    client_itl_mean_ms = itl_ms["mean"]

    result: dict[str, Any] = {
        "probe": "decode",
        "base_url": base,
        "model": model,
        "max_tokens": max_tokens,
        "repeats": repeats,
        "warmup": warmup,
        "prompt_tokens": first["prompt_tokens"],
        "decode_tok_s": stats.median(tok_s),
        "decode_tok_s_ci": [ci[0], ci[1]],
        "decode_tok_s_ci_coverage": stats.median_ci_coverage(len(tok_s)),
        "decode_tok_s_mean": stats.mean(tok_s),
        "ttft_ms": stats.median([r["ttft_ms"] for r in used]),
        "itl_ms": itl_ms,
        "samples": [
            {"decode_tok_s": r["decode_tok_s"], "ttft_ms": r["ttft_ms"], "n_tokens": r["n_tokens"],
             "chunks": r["chunks"], "first_chunk_tokens": r["first_chunk_tokens"],
             "max_chunk_tokens": r["max_chunk_tokens"], "decode_window_ms": r["decode_window_ms"],
             "suspect": r["suspect"],
             **_server_sample(r)}
            for r in runs
        ],
        "token_count_sources": first["count_sources"],
        "output_token_ids": first["ids"],
        "output_digest": _digest(first["ids"], first["text"]),
        "output_text": first["text"],
        "logprobs": first["logprobs"],
        "repeat_outputs_identical": identical,
        "client_itl_ms_mean": client_itl_mean_ms,
        "server_metrics_available": bool(before["available"] and after.get("available")),
        "warnings": warnings,
        "suspect": not clean,
    }
    if server is None:
        result["server_metrics_error"] = after.get("error") or before.get("error")
    else:
        result["server_metrics"] = server
        if "itl_ms_mean" in server:
            result["server_itl_ms_mean"] = server["itl_ms_mean"]
            agreement = abs(client_itl_mean_ms - server["itl_ms_mean"]) / server["itl_ms_mean"]
            result["server_agreement"] = agreement
            if agreement > SERVER_DISAGREEMENT_WARN:
                warnings.append(f"client mean ITL {client_itl_mean_ms:.3f} ms and server mean ITL "
                                f"{server['itl_ms_mean']:.3f} ms differ by {agreement:.0%}")
                result["suspect"] = True
    return _jsonable(result)


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
    d = _hist_delta(before, after, "itl")
    if d and d[1] > 0:
        server["itl_metric"] = after["histograms"]["itl"]["metric"]
        server["itl_ms_mean"] = d[0] / d[1] * 1e3
        server["itl_count"] = d[1]
    d = _hist_delta(before, after, "request_decode_time")
    if d and d[1] > 0:
        server["requests"] = d[1]
        server["decode_time_s_mean"] = d[0] / d[1]
        if d[1] == repeats and d[0] > 0:
            server["decode_tok_s"] = sum(r["n_tokens"] - 1 for r in runs) / d[0]
        elif d[1] != repeats:
            warnings.append(f"server counted {d[1]:g} finished requests during {repeats} measured "
                            "repeats (other traffic?): server figures are not comparable")
    d = _hist_delta(before, after, "ttft")
    if d and d[1] > 0:
        server["ttft_ms_mean"] = d[0] / d[1] * 1e3
    return server


def _settled_metrics(base: str, client: httpx.Client, model: str, before: dict, repeats: int) -> dict:
    """Scrape /metrics until the decode-time histogram counted the measured requests (vLLM
    records a finished request's stats asynchronously), or METRICS_SETTLE_S passed."""
    deadline = time.perf_counter() + METRICS_SETTLE_S
    while True:
        after = scrape_server_metrics(base, client, model=model)
        if not after["available"]:
            return after
        d = _hist_delta(before, after, "request_decode_time")
        if d is None or d[1] >= repeats or time.perf_counter() > deadline:
            return after
        time.sleep(0.05)


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x
