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

Bad input raises ProbeError (never a number): no answer (connect/read timeout), HTTP error
status (body included), stream closed before `max_tokens` tokens or without `data: [DONE]`,
malformed SSE JSON, an error object in the stream, zero tokens, inconsistent token counts.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
import uuid
from typing import Any

import httpx

from runners.analysis import stats
from runners.probes import host
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
# Held-back start/end (see steady_window): a first (or last) arrival this late against the
# steady pace, by at least this many tokens, is a burst (a delayed ACK holds up to 40 ms; a
# client's scheduling jitter on a loaded host is a few ms, and correcting it is harmless);
# a steady window with fewer tokens than this is flagged instead of measured.
HELD_MIN_LATE_S = 0.004
HELD_MIN_TOKENS = 0.5
HELD_MIN_WINDOW_TOKENS = 4
# A chunk arrived "together" with the one before it when its gap is under this fraction of one
# token's time at the stream's pace, whatever it carries. Only such chunks can put a stream ahead
# of its pace: a hold releases its chunks at once, while a pace that drifts (an eager engine's
# steps slow down or speed up along the stream, by 30-40% seen) never brings a gap near half the
# pace, and a chunk of two tokens one step after the last (vLLM's final chunk on an H200) is late
# by a step, not early.
HELD_TOGETHER_FRACTION = 0.5
# Clean repeats wanted (at most `repeats`) and the extra requests allowed to get them.
MIN_CLEAN_REPEATS = 3
MAX_EXTRA_REPEATS = 5
# Client vs server mean ITL: relative difference above which a warning is raised.
SERVER_DISAGREEMENT_WARN = 0.25

# --------------------------------------------------------------------------------------------
# one streamed request


FRESH_CACHE_SALT = "fresh"  # a body's cache_salt of this value becomes a new random salt per request


def _request_body(model: str, prompt: str, max_tokens: int, fresh_prefix: bool = False) -> dict:
    """The streamed greedy request. FRESH_PREFIX: every request sent with this body gets its own
    `cache_salt` (_for_request), so vLLM reuses no cached prefix between requests: no prefix-cache
    hit on a repeat's prefill, no cascade attention over a prefix that concurrent streams share."""
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
        **({"cache_salt": FRESH_CACHE_SALT} if fresh_prefix else {}),
    }


def _for_request(body: dict) -> dict:
    if body.get("cache_salt") == FRESH_CACHE_SALT:
        return {**body, "cache_salt": uuid.uuid4().hex}
    return body


class _Tally:
    """What one streamed completion carried so far: token chunks, counts, usage, finish reason."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.chunks: list[dict] = []  # token-carrying chunks: {"t", "k", "ids", "text"}
        self.n_tokens = 0
        self.prev_usage: int | None = None
        self.final_usage: dict | None = None
        self.finish_reason = None
        self.server_request_metrics = None
        self.count_sources: set[str] = set()
        self.response_id: str | None = None  # the server's completion id (vLLM: cmpl-...), to match its logs

    def so_far(self) -> str:
        return f"{self.n_tokens} of {self.max_tokens} tokens received in {len(self.chunks)} chunks"

    def add(self, t: float, obj: dict, index: int) -> None:
        """Count the tokens of one SSE event that arrived at T."""
        choices = obj.get("choices")
        if self.response_id is None and isinstance(obj.get("id"), str):
            self.response_id = obj["id"]
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
        self.chunks.append({"t": t, "k": k, "ids": ch.get("token_ids"), "text": ch.get("text") or ""})

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
    body = _for_request(body)
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
        "response_id": tally.response_id,
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
    """Timing of one repeat from its raw record (definitions in the module doc)."""
    chunks = rec["chunks"]
    t_send = rec["t_send"]
    n = rec["n_tokens"]
    gaps = [cur["t"] - prev["t"] for prev, cur in zip(chunks, chunks[1:])]
    lo, hi = steady_window(chunks)
    window = chunks[hi]["t"] - chunks[lo]["t"]
    tokens = sum(c["k"] for c in chunks[lo + 1:hi + 1])  # the tokens that arrived inside the window
    decode_tok_s = tokens / window if tokens > 0 and window > 0 else None
    whole = chunks[-1]["t"] - chunks[0]["t"]
    whole_tokens = n - chunks[0]["k"]
    itl: list[float] = []
    for prev, cur in zip(chunks[lo:hi], chunks[lo + 1:hi + 1]):
        itl.extend([(cur["t"] - prev["t"]) / cur["k"]] * cur["k"])
    held = None
    if (lo, hi) != (0, len(chunks) - 1):
        held = {"start_chunks": lo, "end_chunks": len(chunks) - 1 - hi, "window_tokens": tokens,
                "first_arrival_ms": (chunks[0]["t"] - t_send) * 1e3}
    flag, why = _flag(chunks, gaps, lo, hi, tokens, n, decode_tok_s, chunks[0]["t"] - t_send)
    ids = _ids_of(chunks)
    return {
        "decode_tok_s": decode_tok_s,
        "whole_stream_tok_s": whole_tokens / whole if whole_tokens > 0 and whole > 0 else None,
        "ttft_ms": (chunks[0]["t"] - t_send) * 1e3,
        "n_tokens": n,
        "chunks": len(chunks),
        "first_chunk_tokens": chunks[0]["k"],
        "max_chunk_tokens": max(c["k"] for c in chunks),
        "decode_window_ms": window * 1e3,
        "itl_s": itl,
        "held_back": held,
        "flag": flag,
        "ttft_flag": flag or ("held_back" if held and held["start_chunks"] else ""),
        "suspect": why,
        "ids": ids,
        "text": "".join(c["text"] for c in chunks),
        "server_request_metrics": rec["server_request_metrics"],
        "response_id": rec.get("response_id"),
        "prompt_tokens": rec["prompt_tokens"],
        "count_sources": rec["count_sources"],
    }


def steady_window(chunks: list[dict]) -> tuple[int, int]:
    """Indices (lo, hi) of the chunks whose arrivals are real; (0, len - 1) for a healthy stream.

    A held-back start (a first chunk that waited, for a delayed ACK say, and was released with
    the ones generated meanwhile) has two signs, both required (_held_start): a run of chunks
    from the first that arrived together (gaps under HELD_TOGETHER_FRACTION of the stream's pace
    m, the seconds per token over its middle third, _pace), and a first chunk that arrived late
    against the pace of the chunks after the run, by HELD_MIN_LATE_S and HELD_MIN_TOKENS tokens
    at least. The window then starts two chunks after the run (the first one after a burst may
    still have waited for the burst's ACK: seen, +1% on one repeat in ten). A burst over more
    than a third of the chunks is only partly corrected: the window then starts inside it (a rate
    too high, which _burst flags when most gaps are tiny). A held-back end is the mirror
    (_held_end): a closing run of chunks that arrived together, and a last chunk late against the
    pace before the run; the window then ends at the chunk before the run. A pace that drifts
    along the stream (an eager engine's, 30-40% from one end to the other) has no such run; a
    chunk that reached the client late and arrived with the next, on time, is not late at the
    edge: both are timed whole."""
    n = len(chunks)
    if n < 4:
        return 0, n - 1
    m = _pace(chunks)
    if m <= 0:  # everything in one read: _burst flags it
        return 0, n - 1
    t, k = [c["t"] for c in chunks], [c["k"] for c in chunks]
    third = (n + 2) // 3
    b = _held_start(t, k, m, third)
    lo = min(b + 2, n - 1) if b else 0
    r = _held_end(t, k, m, third)
    hi = r - 1 if r else n - 1
    return lo, max(hi, lo)


def _pace(chunks: list[dict]) -> float:
    """Seconds per token over the middle third of the chunks: away from both ends, where bursts
    are, and over a span rather than a median gap (a descheduled client reads chunks in bunches,
    which makes most single gaps tiny while the span stays right)."""
    a, b = len(chunks) // 3, (2 * len(chunks)) // 3
    tokens = sum(c["k"] for c in chunks[a + 1:b + 1])
    return (chunks[b]["t"] - chunks[a]["t"]) / tokens if tokens else 0.0


def _together(t: list[float], j: int, m: float) -> bool:
    """Chunk J arrived together with chunk J - 1."""
    return t[j] - t[j - 1] < HELD_TOGETHER_FRACTION * m


def _late_enough(late: float, m: float) -> bool:
    return late >= HELD_MIN_LATE_S and late >= HELD_MIN_TOKENS * m


def _held_start(t: list[float], k: list[int], m: float, third: int) -> int:
    """Index b of the last chunk of a held-back start (chunks 0..b arrived together, chunk 0 late
    against the pace from chunk b + 1 on), else 0. K[j]: tokens chunk j carried."""
    b = 0
    while b + 1 < third and _together(t, b + 1, m):
        b += 1
    if b == 0:
        return 0
    expected_t0 = t[b + 1] - m * sum(k[1:b + 2])  # where chunk b + 1's pace puts chunk 0
    return b if _late_enough(t[0] - expected_t0, m) else 0


def _held_end(t: list[float], k: list[int], m: float, third: int) -> int:
    """Index r of the first chunk of a held-back end (chunks r..n-1 arrived together, the last
    late against the pace up to chunk r - 1), else 0."""
    n = len(t)
    r = n - 1
    while r > n - third and _together(t, r, m):
        r -= 1
    if r == n - 1:
        return 0
    expected_last = t[r - 1] + m * sum(k[r:])  # where chunk r - 1's pace puts the last one
    return r if _late_enough(t[-1] - expected_last, m) else 0


def _flag(chunks, gaps, lo, hi, tokens, n, decode_tok_s, ttft) -> tuple[str, str | None]:
    """('', None) for a clean repeat, else (flag, why)."""
    why = _burst(chunks, gaps, ttft)
    if why:
        return "burst", why
    if decode_tok_s is None:
        if (lo, hi) != (0, len(chunks) - 1):
            return "held_back", f"held back: no chunk arrived at its own pace ({len(chunks)} chunks)"
        return "no_rate", "all tokens arrived in a single network read"
    if tokens < HELD_MIN_WINDOW_TOKENS:
        return "held_back", (f"held back: only {tokens} of {n} tokens arrived at their own pace (chunks "
                             f"{lo}..{hi} of {len(chunks)}); the rest came in bursts")
    return "", None


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
    body = _request_body(model, prompt, max_tokens, fresh_prefix)
    with CompletionClient(base_url, timeout_s=timeout_s, client=client) as api:
        for _ in range(warmup):
            _stream_once(api, body, timeout_s)
        before = scrape_server_metrics(api, model=model)
        runs, after, host_samples = _measured_repeats(api, body, timeout_s, repeats, model, before)
    warnings: list[str] = []
    server = _server_block(before, after, runs, len(runs), warnings)
    used = _usable_runs(runs, server, warnings, repeats)
    result = _summary(runs, used, warnings, base=api.base_url, model=model, max_tokens=max_tokens,
                      repeats=repeats, warmup=warmup)
    result["server_metrics_available"] = bool(before["available"] and after.get("available"))
    result["host"] = host.summary(host_samples, [r["decode_tok_s"] for r in used])
    if result["host"]["unsteady"]:
        warnings.append(result["host"]["unsteady"])
    if server is None:
        result["server_metrics_error"] = after.get("error") or before.get("error")
    else:
        _compare_with_server(result, server, warnings)
        if result.get("server_agreement", 0) > SERVER_DISAGREEMENT_WARN:
            _flag_server_disagreement(result)
    return _jsonable(result)


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
        run = _analyze(_stream_once(api, body, timeout_s))
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


def _summary(runs: list[dict], used: list[dict], warnings: list[str], **request) -> dict:
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
        "samples": [_sample(r) for r in runs],
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


def _sample(r: dict) -> dict:
    keys = ("decode_tok_s", "whole_stream_tok_s", "ttft_ms", "n_tokens", "chunks", "first_chunk_tokens",
            "max_chunk_tokens", "decode_window_ms", "held_back", "flag", "ttft_flag", "suspect", "host_loop_ms",
            "host_steal")
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


def _server_sample(r: dict) -> dict:
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
