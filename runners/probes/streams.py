"""Decode at concurrency N: one point of a workload (N streams at once, a prompt of P tokens).

    measure_point(base_url=..., model=..., max_tokens=128, repeats=5, concurrency=8, prompt_tokens=512)

Each timed repeat starts N streamed greedy completions at once (one thread each, released
together by a barrier, over one connection each), and every stream is read and judged exactly
as the single-stream probe reads one (runners.probes.decode: exact token counts from every source,
no logprobs, arrival-timestamped reads, steady window, held-back and burst flags per stream).
With REQUEST_RATE the N streams of a round arrive open-loop instead, as a Poisson process of that
many requests a second (exponential gaps, seeded by the round's number so every run of a benchmark
sends the same schedule: `arrival_offsets`), as `vllm bench serve --request-rate` sends them;
`arrivals_s` holds each timed round's offsets. `warmup` unmeasured rounds of N streams come first. With PROMPT_TOKENS every request carries its
own random `cache_salt` (`fresh_prefix`): the streams send one prompt, but vLLM shares no cached
prefix between them or across repeats, so each stream's prefill and KV-cache reads are its own
(without it the timed repeats hit the warm-up's prefix cache, and concurrent streams read one
shared prefix through cascade attention: a best case, not N contexts). At concurrency 1 this is measure_decode
itself (extra repeats, per-repeat engine ITL and all), with the keys below added.

PREFILL says where the streams' prefills run. `inline`: inside the round, so with several long
contexts the streams that decode first share their steps with the chunks of those still
prefilling (decode under concurrent prefill: on an H200, c16-p32768 read ITL p50 20.7 ms against
5.7 alone). `primed`: each round first sends every stream's prompt with its own salt and
max_tokens 1 (the primes, all at once), then the timed streams with the same salts, whose prompts
the prefix cache then serves: every stream decodes from its first token on, over its own context,
in steady state. A primed round's TTFT is its prime's (the cold prefill of N prompts sent
together: what `inline` calls TTFT), each stream keeps the timed request's own as
`cached_ttft_ms`, and `prefix_cache` says how many of the timed streams' prompt tokens vLLM looked
up and found (its `vllm:prefix_cache_*` counters over the timed rounds); under half found (prefix
caching off, prompts shorter than two KV blocks, primes evicted) is a warning, since the prefills
then ran inside the timed window after all. `auto` (the default) primes a closed-loop point of several streams with
PROMPT_TOKENS and leaves the rest inline: one stream's prefill is over before its first token, and
open-loop arrivals (REQUEST_RATE) measure serving, where prefill and decode share the steps.
With /metrics, the server's figures are read per timed round (before it and after it), so the
primes are in none of them.

The result keeps the single-stream probe's keys (`decode_tok_s`, `ttft_ms`, `itl_ms` with
p50/p90/p99 pooled over clean streams, `samples`, `warnings`, ...) and always has:
  decode_tok_s          median of the clean streams' rates over all timed repeats
  slowest_stream_tok_s  the lowest clean stream's rate
  aggregate_tok_s       median over repeats of: the tokens of all the repeat's streams that arrived
                        after its first token / (last token of any stream - first token of any
                        stream); the token that opens the window is not counted, as in one
                        stream's rate, so at concurrency 1 this is the stream's whole rate. Over the
                        repeats whose streams are all clean (else all repeats, said in `warnings`)
  ttft_ms_percentiles   p50/p90/p99 of the clean streams' TTFT (ttft_ms: their median)
  streams               one object per timed stream: repeat, stream, decode_tok_s, ttft_ms, n_tokens,
                        flags {flag, ttft_flag, held_back} (the single-stream probe's flags)
  concurrency, prompt_tokens (as the server counted it), prompt_tokens_requested, prefill
At concurrency N `samples` hold every stream, repeat-major (sample i is stream i % N of repeat
i // N), `repeats_made` counts rounds, `repeats_clean` the rounds whose streams are all clean and
`streams_clean` the clean streams; no extra rounds are
made for flagged streams (the other streams of the round still measure), and when no stream is
clean the figures come from flagged ones, said in `warnings`.
"""
from __future__ import annotations

import random
import threading
import time
import uuid

import httpx

from runners.analysis import stats
from runners.probes import host
from runners.probes.client import CompletionClient, ProbeError
from runners.probes.decode import DEFAULT_PROMPT, jsonable, measure_decode, sample_entry, summarize
from runners.probes.metrics import counter_delta, joined_windows, scrape_server_metrics, settled_metrics
from runners.probes.prompts import exact_prompt
from runners.probes.server_check import check_with_server, server_block
from runners.probes.steady_window import analyze_repeat
from runners.probes.streamed_request import request_body, stream_once

MAX_CONCURRENCY = 1024
MAX_REQUEST_RATE = 10_000.0  # requests a second
PREFILL_MODES = ("auto", "primed", "inline")


def check_point(*, concurrency: int, prompt_tokens: int | None, max_tokens: int, repeats: int, warmup: int,
                request_rate: float | None = None) -> None:
    """ValueError for arguments no server could measure, before any request."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    if request_rate is not None and (isinstance(request_rate, bool) or not isinstance(request_rate, (int, float))
                                     or not 0 < request_rate <= MAX_REQUEST_RATE):
        raise ValueError(f"request_rate must be a number of requests a second above 0 and at most "
                         f"{MAX_REQUEST_RATE:g}, got {request_rate!r}")
    if prompt_tokens is not None and (not isinstance(prompt_tokens, int) or prompt_tokens < 1):
        raise ValueError(f"prompt_tokens must be a positive integer, got {prompt_tokens!r}")
    if max_tokens < 2:
        raise ValueError("max_tokens must be >= 2 to measure decode (the first token is prefill)")
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")


def prefill_mode(prefill: str, *, concurrency: int, prompt_tokens: int | None,
                 request_rate: float | None) -> str:
    """`primed` or `inline` for the point (module doc); ValueError for a mode it cannot have."""
    if prefill not in PREFILL_MODES:
        raise ValueError(f"prefill must be one of {', '.join(PREFILL_MODES)}, got {prefill!r}")
    can_prime = concurrency > 1 and prompt_tokens is not None and request_rate is None
    if prefill == "auto":
        return "primed" if can_prime else "inline"
    if prefill == "primed" and not can_prime:
        raise ValueError("prefill 'primed' needs prompt_tokens (each stream's own context to prime), "
                         "concurrency above 1 and no request_rate")
    return prefill


def measure_point(*, base_url: str, model: str, max_tokens: int, repeats: int, warmup: int = 1,
                  concurrency: int = 1, prompt: str = DEFAULT_PROMPT, prompt_tokens: int | None = None,
                  request_rate: float | None = None, prefill: str = "auto", timeout_s: float = 120,
                  client: httpx.Client | None = None) -> dict:
    """Decode at CONCURRENCY streams; with PROMPT_TOKENS the prompt is PROMPT's text cut to exactly
    that many tokens by the server's tokenizer (runners.probes.prompts); with REQUEST_RATE the
    streams arrive open-loop; PREFILL: where their prefills run. CLIENT, when given, must pool at
    least CONCURRENCY connections (httpx pools 100 by default). See the module doc."""
    check_point(concurrency=concurrency, prompt_tokens=prompt_tokens, max_tokens=max_tokens, repeats=repeats,
                warmup=warmup, request_rate=request_rate)
    mode = prefill_mode(prefill, concurrency=concurrency, prompt_tokens=prompt_tokens, request_rate=request_rate)
    built = None
    if prompt_tokens is not None:
        with CompletionClient(base_url, timeout_s=timeout_s, client=client) as api:
            built = exact_prompt(api, model, prompt_tokens, max_tokens, seed=prompt)
        prompt = built["prompt"]
    args = dict(base_url=base_url, model=model, prompt=prompt, max_tokens=max_tokens, repeats=repeats,
                warmup=warmup, timeout_s=timeout_s)
    fresh = prompt_tokens is not None  # a context to read: no request reuses another's cached prefix
    if concurrency == 1:  # one request at a time: open-loop arrivals change nothing
        result = with_stream_keys(measure_decode(**args, client=client, fresh_prefix=fresh))
    else:
        result = _measure_concurrent(**args, concurrency=concurrency, client=client, request_rate=request_rate,
                                     fresh_prefix=fresh, primed=mode == "primed")
    result["fresh_prefix"] = fresh
    result["prefill"] = mode
    result["prompt_tokens_requested"] = prompt_tokens
    result["request_rate"] = request_rate
    if built is not None:
        result["prompt_cut_tokens"] = built["cut"]
        counted = {s.get("prompt_tokens") for s in result["streams"]} - {None}
        if counted and counted != {prompt_tokens}:
            result["warnings"].append(f"the server counted {sorted(counted)} prompt tokens, {prompt_tokens} "
                                      "were built with its /tokenize")
    return result


def with_stream_keys(result: dict) -> dict:
    """The single-stream result with the keys of a point at concurrency 1 (see the module doc)."""
    samples = result["samples"]
    clean = [s for s in samples if not s["flag"]] or [s for s in samples if s["decode_tok_s"] is not None]
    ttfts = [s["ttft_ms"] for s in clean if not s["ttft_flag"]] or [s["ttft_ms"] for s in clean]
    result.update(
        concurrency=1,
        slowest_stream_tok_s=min(s["decode_tok_s"] for s in clean),
        aggregate_tok_s=stats.median([s["whole_stream_tok_s"] for s in clean if s["whole_stream_tok_s"]]),
        ttft_ms_percentiles=stats.percentiles(ttfts),
        streams=[_stream_entry(s, i, 0, result["prompt_tokens"]) for i, s in enumerate(samples)],
        streams_clean=result["repeats_clean"])
    return result


def _stream_entry(s: dict, repeat: int, stream: int, prompt_tokens: int | None) -> dict:
    entry = {"repeat": repeat, "stream": stream, "decode_tok_s": s["decode_tok_s"], "ttft_ms": s["ttft_ms"],
             "n_tokens": s["n_tokens"], "prompt_tokens": prompt_tokens, "response_id": s.get("response_id"),
             "flags": {"flag": s["flag"], "ttft_flag": s["ttft_flag"], "held_back": s["held_back"]}}
    if "cached_ttft_ms" in s:
        entry["cached_ttft_ms"] = s["cached_ttft_ms"]
    return entry


def arrival_offsets(concurrency: int, request_rate: float, seed: int) -> list[float]:
    """Seconds after a round's start at which its streams are sent: a Poisson process of
    REQUEST_RATE a second (the first at 0), the same for the same SEED."""
    rng, t, offsets = random.Random(seed), 0.0, [0.0]
    for _ in range(concurrency - 1):
        t += rng.expovariate(request_rate)
        offsets.append(t)
    return offsets


def run_round(api: CompletionClient, bodies: list[dict], timeout_s: float,
              arrivals: list[float] | None = None) -> list[dict]:
    """One stream per request body, started together (a barrier releases their threads at once),
    or each at its offset in ARRIVALS (seconds after the release); their raw records in start
    order. The first failure is raised once every stream has ended."""
    concurrency = len(bodies)
    records: list[dict | None] = [None] * concurrency
    errors: list[BaseException] = []
    gate = threading.Barrier(concurrency, timeout=timeout_s)

    def one(i: int) -> None:
        try:
            gate.wait()
            if arrivals:
                time.sleep(max(0.0, released + arrivals[i] - time.perf_counter()))
            records[i] = stream_once(api, bodies[i], timeout_s)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(e)
            gate.abort()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(concurrency)]
    released = time.perf_counter() + 0.05  # the threads are all waiting at the barrier by then
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        e = (real or errors)[0]
        raise e if isinstance(e, ProbeError) else ProbeError(f"{len(errors)} of {concurrency} streams failed: {e!r}")
    return records  # type: ignore[return-value]


def aggregate_rate(streams: list[dict]) -> float | None:
    """Tokens of all STREAMS (analyzed, with their raw chunks) that arrived after the first token
    of any / (last token of any - first token of any); None for an empty window."""
    firsts = [s["raw_chunks"][0] for s in streams]
    start = min(c["t"] for c in firsts)
    end = max(s["raw_chunks"][-1]["t"] for s in streams)
    opening = min(firsts, key=lambda c: c["t"])["k"]
    tokens = sum(s["n_tokens"] for s in streams) - opening
    return tokens / (end - start) if end > start and tokens > 0 else None


def http_client(concurrency: int, timeout_s: float) -> httpx.Client:
    """One connection per stream (httpx pools 100 by default): none waits for another's."""
    return httpx.Client(trust_env=False, timeout=httpx.Timeout(timeout_s),
                        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))


def round_bodies(body: dict, concurrency: int, primed: bool) -> list[dict]:
    """The timed requests of a round: BODY for every stream, or, PRIMED, each with a salt of its own
    that its prime shares (a fresh-prefix BODY otherwise draws a new salt per request)."""
    if not primed:
        return [body] * concurrency
    return [{**body, "cache_salt": uuid.uuid4().hex} for _ in range(concurrency)]


def prime(api: CompletionClient, bodies: list[dict], timeout_s: float) -> list[float]:
    """Send every body's prompt with max_tokens 1, all at once: each stream's context is in the
    prefix cache for its timed request. The primes' TTFTs in ms."""
    records = run_round(api, [{**b, "max_tokens": 1} for b in bodies], timeout_s)
    return [(r["chunks"][0]["t"] - r["t_send"]) * 1e3 for r in records]


def _timed_rounds(api: CompletionClient, body: dict, model: str, concurrency: int, repeats: int,
                  warmup: int, timeout_s: float, request_rate: float | None = None, primed: bool = False,
                  ) -> tuple[list[list[dict]], list[tuple[dict, dict]], list[dict]]:
    """Warmup rounds, then REPEATS timed ones (each PRIMED first, when asked): the analyzed streams
    of each (a primed one with its prime's `prime_ttft_ms`), the /metrics scrapes before and
    after each timed round, and the host samples (one before each timed round, one after the last)."""
    def arrivals(seed: int) -> list[float] | None:
        return arrival_offsets(concurrency, request_rate, seed) if request_rate else None

    for i in range(warmup):
        bodies = round_bodies(body, concurrency, primed)
        if primed:
            prime(api, bodies, timeout_s)
        run_round(api, bodies, timeout_s, arrivals(-1 - i))
    scrape = scrape_server_metrics(api, model=model)
    rounds, windows, samples = [], [], []
    for i in range(repeats):
        bodies = round_bodies(body, concurrency, primed)
        primes = prime(api, bodies, timeout_s) if primed else [None] * concurrency
        if primed and scrape["available"]:  # the primes' figures land before the timed round's window
            scrape = settled_metrics(api, model, scrape, concurrency)
        samples.append(host.sample())
        records = run_round(api, bodies, timeout_s, arrivals(i))
        after = settled_metrics(api, model, scrape, concurrency) if scrape["available"] else scrape
        windows.append((scrape, after))
        scrape = after
        end = host.sample()
        where = {"host_loop_ms": samples[-1]["loop_ms"], "host_steal": host.steal_between(samples[-1], end)}
        rounds.append([{**analyze_repeat(rec), **where, "raw_chunks": rec["chunks"], "prime_ttft_ms": ttft}
                       for rec, ttft in zip(records, primes)])
    samples.append(end)
    return rounds, windows, samples


def _measure_concurrent(*, base_url: str, model: str, prompt: str, max_tokens: int, repeats: int, warmup: int,
                        timeout_s: float, concurrency: int, client: httpx.Client | None,
                        request_rate: float | None = None, fresh_prefix: bool = False, primed: bool = False) -> dict:
    body = request_body(model, prompt, max_tokens, fresh_prefix)
    http = client or http_client(concurrency, timeout_s)
    try:
        with CompletionClient(base_url, timeout_s=timeout_s, client=http) as api:
            rounds, windows, host_samples = _timed_rounds(api, body, model, concurrency, repeats, warmup,
                                                          timeout_s, request_rate, primed)
    finally:
        if client is None:
            http.close()
    before, after = joined_windows(windows)
    runs = [s for r in rounds for s in r]
    warnings: list[str] = []
    if primed:
        _primed_ttft(runs)
    server = server_block(before, after, runs, len(runs), warnings)
    used = _usable_streams(rounds, warnings)
    result = summarize(runs, used, warnings, base=api.base_url, model=model, max_tokens=max_tokens,
                      repeats=repeats, warmup=warmup)
    _add_point_keys(result, rounds, used, warnings)
    result["server_metrics_available"] = bool(before["available"] and after.get("available"))
    if request_rate:
        result["arrivals_s"] = [arrival_offsets(concurrency, request_rate, i) for i in range(repeats)]
    if primed:
        result["prefix_cache"] = _prefix_cache(before, after, warnings)
    result["host"] = host.summary(host_samples, [a for a in result["aggregate_tok_s_per_repeat"] if a])
    if result["host"]["unsteady"]:
        warnings.append(result["host"]["unsteady"])
    if server is None:
        result["server_metrics_error"] = after.get("error") or before.get("error")
    else:
        if check_with_server(result, server, warnings):
            for entry, sample in zip(result["streams"], result["samples"]):
                entry["flags"]["flag"] = sample["flag"]
    return jsonable(result)


def _primed_ttft(runs: list[dict]) -> None:
    """A primed stream's TTFT is its prime's (the cold prefill); the timed request's first token,
    served from the prefix cache, is kept as `cached_ttft_ms`. A prime's one chunk cannot show a
    hold, so the TTFT is flagged only with the stream."""
    for s in runs:
        s["cached_ttft_ms"], s["ttft_ms"], s["ttft_flag"] = s["ttft_ms"], s["prime_ttft_ms"], s["flag"]


def _prefix_cache(before: dict, after: dict, warnings: list[str]) -> dict:
    """The timed streams' prompt tokens vLLM looked up in its prefix cache and found there; a
    warning when it found under half of them (module doc): a prompt of two KV blocks or more has
    all but its last partial block found."""
    queries, hits = (counter_delta(before, after, k) for k in ("prefix_cache_queries", "prefix_cache_hits"))
    if hits is None or queries is None:
        return {"queries": None, "hits": None}
    if not queries or hits < queries / 2:
        warnings.append(f"the prefix cache served {hits:g} of the {queries:g} prompt tokens the timed streams looked "
                        "up (prefix caching off, prompts shorter than two KV blocks, or primes evicted?): their "
                        "prefills ran inside the timed window, as with prefill 'inline'")
    return {"queries": queries, "hits": hits}


def _usable_streams(rounds: list[list[dict]], warnings: list[str]) -> list[dict]:
    """The clean streams; when none is clean, every one with a rate, said so (ProbeError if none)."""
    for i, streams in enumerate(rounds):
        for j, s in enumerate(streams):
            if s["flag"]:
                warnings.append(f"repeat {i} stream {j}: {s['suspect']}")
    runs = [s for r in rounds for s in r]
    clean = [s for s in runs if not s["flag"]]
    used = clean or [s for s in runs if s["decode_tok_s"] is not None]
    if not used:
        raise ProbeError("no stream gave a measurable decode rate (all chunks arrived at once at the end?): "
                         + "; ".join(warnings[:10]), received={"streams": len(runs)})
    if not clean:
        warnings.append(f"no clean stream in {len(runs)}: the figures come from flagged streams")
    elif len(clean) < len(runs):
        warnings.append(f"statistics use {len(clean)} of {len(runs)} streams (flagged ones excluded)")
    return used


def _add_point_keys(result: dict, rounds: list[list[dict]], used: list[dict], warnings: list[str]) -> None:
    """The keys of a point (module doc) over the ROUNDS of streams; USED: the streams the statistics use."""
    n = len(rounds[0])
    per_repeat = [aggregate_rate(streams) for streams in rounds]
    whole = [a for a, streams in zip(per_repeat, rounds) if a is not None and not any(s["flag"] for s in streams)]
    if not whole:
        whole = [a for a in per_repeat if a is not None]
        warnings.append("no repeat had all its streams clean: aggregate_tok_s is over repeats with flagged streams")
    ttft_used = [s for s in used if not s["ttft_flag"]] or used
    result.update(
        concurrency=n, repeats_made=len(rounds), repeats_clean=sum(not any(s["flag"] for s in r) for r in rounds),
        streams_clean=sum(not s["flag"] for r in rounds for s in r),
        slowest_stream_tok_s=min(s["decode_tok_s"] for s in used),
        aggregate_tok_s=stats.median(whole) if whole else None, aggregate_tok_s_per_repeat=per_repeat,
        ttft_ms_percentiles=stats.percentiles([s["ttft_ms"] for s in ttft_used]),
        samples=[{**sample_entry(s), "repeat": i, "stream": j} for i, r in enumerate(rounds) for j, s in enumerate(r)],
        streams=[_stream_entry(s, i, j, s["prompt_tokens"]) for i, r in enumerate(rounds) for j, s in enumerate(r)],
        notes=[f"repeat {i} stream {j}: {h['start_chunks']} leading and {h['end_chunks']} trailing chunks arrived in "
               f"bursts (held back): rate over the {h['window_tokens']} tokens that arrived at their own pace"
               for i, r in enumerate(rounds) for j, s in enumerate(r) if (h := s["held_back"]) and not s["flag"]])
