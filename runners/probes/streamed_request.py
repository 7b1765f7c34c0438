"""One streamed greedy completion, read whole: the request body, every SSE event counted as it
arrives (exact token counts from every source the server gives, which must agree), and the
checks that the stream is complete. runners.probes.decode describes what is counted and why.

    record = stream_once(api, request_body(model, prompt, 64), timeout_s=120)
    record["chunks"]   # [{"t": arrival (perf_counter), "k": tokens, "ids": [...], "text": "..."}, ...]

Bad input raises ProbeError: an HTTP error status, a stream closed before `max_tokens` tokens
or without `data: [DONE]`, malformed SSE JSON, zero tokens, inconsistent token counts.
"""
from __future__ import annotations

import json
import time
import uuid

from runners.probes.client import CompletionClient, ProbeError, clip

FRESH_CACHE_SALT = "fresh"  # a body's cache_salt of this value becomes a new random salt per request


def request_body(model: str, prompt: str, max_tokens: int, fresh_prefix: bool = False) -> dict:
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


def stream_once(api: CompletionClient, body: dict, timeout_s: float) -> dict:
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

