"""Allreduce-share probe: how much of each decode step goes to tensor-parallel allreduce,
measured with vLLM's torch profiler on a live server.

    args = profiler_engine_args(trace_dir)          # add to the engine's flags
    ... start the engine ...
    result = measure_allreduce_share(base_url=..., model=..., trace_dir=trace_dir, prompt=...)

Engine flags. `profiler_engine_args` returns `--profiler-config {json}` for vLLM's
`ProfilerConfig` (vLLM >= 0.11; 0.32.0 checked): torch profiler, stack recording OFF (with
stacks a worker wrote ~1 GB of JSON per rank and was OOM-killed), no shapes, memory or
FLOPs, gzip on, and `ignore_frontend` (no API-server CPU trace: not needed, and it would
record for the whole session). Enabling the config costs nothing until /start_profile: the
worker's profiler object is created at the first /start_profile, and until then each step
only checks `if not self.profiler`; the config does not enter vLLM's compile hash. So the
job runner should add these flags to the MAIN engine and run this probe after the decode
probe (tok/s must come from unprofiled requests: an active profiler records every op, and
the request it profiles is not representative). A dedicated profiling engine start would
only cost time (60-110 s on the 2-core CPU host at TP=2).

One measurement (`measure_allreduce_share`): POST /start_profile (with a unique
`profile_prefix`, so the files of this session are told apart from older ones), one
streamed greedy completion (temperature 0, ignore_eos, exactly `max_tokens` tokens), POST
/stop_profile (vLLM writes the traces and a summary table before it answers: 4-21 s on
the 2-core CPU host for 64 tokens, ~0.9 MB gzipped per rank), then wait until
every rank's trace file is complete (gzip + JSON parse; torch writes the .gz in place, not
atomically) and parse each one with `parse_trace`.

At a workload point (`concurrency=N`, `prompt_tokens=P`): the prompt is cut to exactly P tokens
with the server's tokenizer before the profiler starts, then N streams are released together
(runners.probes.streams.run_round) inside the one session, each with its own `cache_salt` so no
stream reads another's cached prefix. With several streams and P, each stream's prompt is primed
before the profiler starts (streams.prime: sent alone with max_tokens 1, then served from the prefix
cache), as the decode probe primes such a point: the streams start decoding together instead of
one after another's prefill, so the session's steps are the batch of N (`prefill` in the result).
The share is over all the session's decode steps; each rank's `full_batch_steps` counts those with
all N streams decoding (see `_check_session`).

Trace parsing lives in runners/probes/trace.py (`parse_trace`, one rank's file).

`measure_allreduce_share` returns `aggregate(...)`: ok, problems, ranks [per rank],
share_min, share_max, calls_per_step, expected_calls_per_step, us_per_call_min,
step_ms_median; plus request, trace_dir, trace_files, profile_prefix, stop_profile_s (and
concurrency, prompt_tokens at a workload point other than one request of the given prompt).
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Callable

import httpx

from runners.analysis import stats
from runners.probes.client import CompletionClient, ProbeError
from runners.probes.prompts import exact_prompt
from runners.probes.streamed_request import request_body
from runners.probes.streams import check_point, http_client, prefill_mode, prime, round_bodies, run_round
from runners.probes.trace import STEP_RE, TraceError, parse_trace

TRACE_GLOB_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
TRACE_SETTLE_S = 2.0  # without an expected rank count: traces done when the set stays this long


# --------------------------------------------------------------------- engine flags

def profiler_engine_args(trace_dir: Path) -> list[str]:
    """Engine flags that enable vLLM's torch profiler, writing into TRACE_DIR (absolute).

    Add them to the main engine's flags; profiling then runs only between /start_profile
    and /stop_profile (see the module doc for why the main engine is the right place).
    """
    trace_dir = Path(trace_dir).expanduser().resolve()
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(trace_dir),
        "torch_profiler_with_stack": False,   # default True: ~1 GB JSON per rank, OOM
        "torch_profiler_record_shapes": False,
        "torch_profiler_with_memory": False,
        "torch_profiler_with_flops": False,
        "torch_profiler_use_gzip": True,
        "ignore_frontend": True,              # no API-server trace
    }
    return ["--profiler-config", json.dumps(config, separators=(",", ":"))]


# ---------------------------------------------------------------- expected call count

def expected_allreduce_calls(config: dict, *, tensor_parallel_size: int = 2) -> int:
    """Allreduces per decode step of a dense decoder under tensor parallelism.

    2 per layer (attention o_proj, MLP down_proj: row-parallel) + 1 for the vocab-parallel
    input embedding; 0 at TP=1. The logits' gather is not counted (it is an all_gather).
    For multimodal configs the `text_config` is used.

    The count is exact for DeepSeek-V2/V3 MoE + MLA too (vLLM's `deepseek_v2.py`): the MLA
    o_proj reduces once, and an MoE block reduces once, its shared experts included (they run
    with `reduce_results=False` and the MoE runner's final all-reduce sums routed + shared).
    It does not hold with sequence-parallel MoE (expert parallelism with an all2all backend:
    reduce-scatter/all-gather instead), nor with decode context parallelism.
    """
    if isinstance(tensor_parallel_size, bool) or not isinstance(tensor_parallel_size, int) \
            or tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size must be an integer >= 1, got {tensor_parallel_size!r}")
    if not isinstance(config, dict):
        raise ValueError("config must be a dict (a HF config.json)")
    cfg = config
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer", cfg.get("num_layers")))
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"config has no valid num_hidden_layers: {layers!r}")
    if tensor_parallel_size == 1:
        return 0
    return 2 * layers + 1


# ----------------------------------------------------------------------- aggregation

def aggregate(ranks: list[dict], *, expected_calls: int | None = None) -> dict:
    """Combine per-rank results: `share_min` (lowest rank: nearest the transfer cost, the
    others include waiting for the slower rank), `share_max`, `calls_per_step`, ..."""
    problems = [f"rank {r.get('rank')}: {p}" for r in ranks for p in r.get("problems", [])]
    shares = [r["allreduce_share"] for r in ranks if r.get("allreduce_share") is not None]
    calls = {r.get("allreduce_calls_per_step") for r in ranks}
    calls_per_step = None
    if len(calls) == 1:
        calls_per_step = calls.pop()
    elif ranks:
        problems.append(f"ranks disagree on allreduce calls per step: {sorted(c for c in calls if c is not None)}")
    if expected_calls is not None and calls_per_step is not None and calls_per_step != expected_calls:
        problems.append(f"allreduce calls per step {calls_per_step:g} != expected {expected_calls}")
    if not ranks:
        problems.append("no rank trace parsed")
    us = [r["allreduce_us_per_call"] for r in ranks if r.get("allreduce_us_per_call") is not None]
    steps = [r["step_ms_median"] for r in ranks if r.get("step_ms_median") is not None]
    gaps = [r["launch_gap_us_per_step_median"] for r in ranks if r.get("launch_gap_us_per_step_median") is not None]
    return {
        "ok": not problems and len(shares) == len(ranks),
        "problems": problems,
        "ranks": ranks,
        "share_min": min(shares) if len(shares) == len(ranks) and shares else None,
        "share_max": max(shares) if len(shares) == len(ranks) and shares else None,
        "calls_per_step": calls_per_step,
        "expected_calls_per_step": expected_calls,
        "us_per_call_min": min(us) if us else None,
        "step_ms_median": stats.median(steps) if steps else None,
        # GPU traces: device idle between a decode step's kernels (host launch overhead), ranks' median
        "launch_gap_ms": stats.median(gaps) / 1000.0 if gaps else None,
    }


# ---------------------------------------------------------------------- measurement

def _trace_files(trace_dir: Path) -> set[Path]:
    if not trace_dir.is_dir():
        return set()
    return {p for p in trace_dir.iterdir()
            if p.is_file() and p.name.endswith(TRACE_GLOB_SUFFIXES) and "async_llm" not in p.name}


def _post_profile(api: CompletionClient, what: str, timeout_s: float, body: dict | None = None) -> None:
    """POST /start_profile or /stop_profile; ProbeError unless it answers 2xx."""
    r = api.post(f"/{what}", json_body=body, timeout_s=timeout_s)
    if r.status_code == 404:
        raise ProbeError(f"{what}: 404 - the server was started without --profiler-config "
                         "(see profiler_engine_args)", r.text[:2000])
    if r.status_code >= 400:
        raise ProbeError(f"{what}: HTTP {r.status_code}", r.text[:2000])


def _stream_completion(api: CompletionClient, model: str, prompt: str, max_tokens: int, timeout_s: float) -> dict:
    """One greedy streamed completion of exactly MAX_TOKENS tokens (the profiled request)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    chunks, usage, finish = 0, None, None
    t0 = time.perf_counter()
    with api.stream_completion(body, timeout_s=timeout_s, progress=lambda: f"{chunks} chunks") as stream:
        for _t, obj in stream:
            usage = obj.get("usage") or usage
            for c in obj.get("choices") or []:
                chunks += 1
                finish = c.get("finish_reason") or finish
    n = (usage or {}).get("completion_tokens")
    if not stream.saw_done:
        raise ProbeError("completion: stream ended without data: [DONE]")
    if n != max_tokens:
        raise ProbeError(f"completion: {n} tokens generated, expected {max_tokens}", usage)
    return {"completion_tokens": n, "chunks": chunks, "finish_reason": finish,
            "seconds": round(time.perf_counter() - t0, 4)}


def _wait_for_traces(trace_dir: Path, before: set[Path], prefix: str, deadline: float,
                     expected_ranks: int | None) -> dict[Path, dict]:
    """New trace files of this session, each parsed once complete: {path: parsed}."""
    parsed: dict[Path, dict] = {}
    last_error: dict[Path, str] = {}
    stable_since, last_set = None, None
    while True:
        new = _trace_files(trace_dir) - before
        mine = {p for p in new if p.name.startswith(prefix + "_")} or new  # old vLLM: no prefix
        for p in sorted(mine - set(parsed)):
            try:
                parsed[p] = parse_trace(p)
            except TraceError as e:  # still being written
                last_error[p] = str(e)
        now = time.monotonic()
        if mine != last_set:
            last_set, stable_since = set(mine), now
        complete = bool(mine) and set(parsed) == mine
        if complete and (len(mine) >= expected_ranks if expected_ranks else now - stable_since >= TRACE_SETTLE_S):
            return parsed
        if now >= deadline:
            detail = "; ".join(last_error.get(p, "") for p in mine - set(parsed))
            raise ProbeError(
                f"profiler traces not complete in time: {len(parsed)} parsed of {len(mine)} new file(s) "
                f"in {trace_dir}" + (f", expected {expected_ranks}" if expected_ranks else "")
                + (f" ({detail})" if detail else ""))
        time.sleep(0.5)


def _profiled_request(api: CompletionClient, prefix: str, deadline: float,
                      send: Callable[[float], dict]) -> tuple[dict, float]:
    """start_profile, SEND(timeout_s) (the requests), stop_profile (also when they fail);
    (SEND's result, stop seconds)."""
    def left(at_least: float) -> float:
        return max(at_least, deadline - time.monotonic())

    _post_profile(api, "start_profile", left(1.0), {"profile_prefix": prefix})
    try:
        result = send(left(1.0))
    except BaseException:
        try:  # never leave the profiler running; the request's error is the one to raise
            _post_profile(api, "stop_profile", left(5.0))
        except ProbeError:
            pass
        raise
    t_stop = time.monotonic()
    _post_profile(api, "stop_profile", left(5.0))
    return result, time.monotonic() - t_stop


def _concurrent_streams(api: CompletionClient, bodies: list[dict], timeout_s: float) -> dict:
    """The greedy streams of BODIES (each of exactly its max_tokens) released together
    (streams.run_round), each with its own cache_salt: no stream reads another's cached prefix."""
    concurrency = len(bodies)
    t0 = time.perf_counter()
    records = run_round(api, bodies, timeout_s)
    return {"concurrency": concurrency, "completion_tokens": [r["n_tokens"] for r in records],
            "prompt_tokens": [r["prompt_tokens"] for r in records], "seconds": round(time.perf_counter() - t0, 4)}


def measure_allreduce_share(*, base_url: str, model: str, trace_dir: Path, prompt: str, max_tokens: int = 64,
                            timeout_s: float = 300, client: httpx.Client | None = None,
                            expected_ranks: int | None = None, expected_calls: int | None = None,
                            concurrency: int = 1, prompt_tokens: int | None = None) -> dict:
    """Profile greedy streamed requests of MAX_TOKENS and return the allreduce share.

    One request of PROMPT by default. With CONCURRENCY > 1 or PROMPT_TOKENS: CONCURRENCY
    streams at once under one profiler session, PROMPT cut to exactly PROMPT_TOKENS tokens by
    the server's tokenizer (runners.probes.prompts), each stream with its own cache_salt.
    TRACE_DIR must be the directory given to `profiler_engine_args` for this server (same
    machine). Returns `aggregate(...)` plus `request`, `trace_files`, `profile_prefix`,
    `stop_profile_s`, `concurrency`, `prompt_tokens`. Raises ProbeError when the server does
    not answer properly or the traces never appear; implausible figures go to `problems`.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ValueError(f"max_tokens must be an integer >= 2, got {max_tokens!r}")
    check_point(concurrency=concurrency, prompt_tokens=prompt_tokens, max_tokens=max_tokens, repeats=1, warmup=0)
    trace_dir = Path(trace_dir).expanduser().resolve()
    deadline = time.monotonic() + timeout_s
    prefix = "ar" + time.strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:8]
    before = _trace_files(trace_dir)
    single = concurrency == 1 and prompt_tokens is None
    primed = prefill_mode("auto", concurrency=concurrency, prompt_tokens=prompt_tokens, request_rate=None) == "primed"
    http = client if client is not None or single else http_client(concurrency, timeout_s)
    try:
        with CompletionClient(base_url, timeout_s=timeout_s, connect_s=10.0, client=http) as api:
            if prompt_tokens is not None:  # built before the profiler starts: /tokenize is not profiled
                prompt = exact_prompt(api, model, prompt_tokens, max_tokens, seed=prompt)["prompt"]
            if single:
                def send(timeout):
                    return _stream_completion(api, model, prompt, max_tokens, timeout)
            else:
                bodies = round_bodies(request_body(model, prompt, max_tokens, fresh_prefix=True), concurrency, primed)
                if primed:  # before the profiler starts: the session holds the streams' decode, not their prefill
                    prime(api, bodies, max(1.0, deadline - time.monotonic()))

                def send(timeout):
                    return _concurrent_streams(api, bodies, timeout)
            request, stop_s = _profiled_request(api, prefix, deadline, send)
    finally:
        if http is not client:
            http.close()
    parsed = _wait_for_traces(trace_dir, before, prefix, deadline, expected_ranks)
    ranks = sorted(parsed.values(), key=lambda r: (r["rank"] is None, r["rank"], r["file"]))
    out = aggregate(ranks, expected_calls=expected_calls)
    _check_session(out, ranks, max_tokens, expected_ranks, concurrency)
    out.update({
        "request": request,
        "trace_dir": str(trace_dir),
        "trace_files": [str(p) for p in sorted(parsed)],
        "profile_prefix": prefix,
        "stop_profile_s": round(stop_s, 3),
    })
    if not single:
        out.update(concurrency=concurrency, prompt_tokens=prompt_tokens, prefill="primed" if primed else "inline")
    return out


def batch_sizes(step_names: dict) -> dict[int, int]:
    """{streams decoding in a step: number of such decode steps}, from a rank's `step_names`."""
    sizes: dict[int, int] = {}
    for name, count in (step_names or {}).items():
        m = STEP_RE.match(name)
        if m:
            sizes[int(m.group("gen"))] = sizes.get(int(m.group("gen")), 0) + count
    return sizes


def _check_session(out: dict, ranks: list[dict], max_tokens: int, expected_ranks: int | None,
                   concurrency: int = 1) -> None:
    """Every rank traced, and the decode steps the requests account for.

    One request: one decode step per token after the first. N streams: vLLM may admit them in
    more than one prefill step and they then finish at different steps, so the count of decode
    steps is not fixed; what is checked is that no step decodes more than N streams (no other
    request ran) and that steps with all N streams decoding are at least half of the decode
    steps (the share is then mostly the batch of N, not of fewer). The share itself is over all
    of the session's decode steps; `full_batch_steps` gives how many had all N.
    """
    if expected_ranks and len(ranks) != expected_ranks:
        out["problems"].append(f"{len(ranks)} rank trace(s), expected {expected_ranks}")
        out["ok"] = False
    for r in ranks:
        if concurrency == 1:  # the prefill step makes token 1, each decode step one more
            if r["decode_steps"] and r["decode_steps"] != max_tokens - 1:
                out["problems"].append(
                    f"rank {r['rank']}: {r['decode_steps']} decode steps for {max_tokens} tokens, expected "
                    f"{max_tokens - 1} (another request running, speculative decoding, or steps not recorded)")
                out["ok"] = False
            continue
        sizes = batch_sizes(r.get("step_names"))
        r["full_batch_steps"] = full = sizes.get(concurrency, 0)
        if max(sizes, default=0) > concurrency:
            out["problems"].append(f"rank {r['rank']}: a decode step of {max(sizes)} streams, {concurrency} were "
                                   "sent (another request running)")
            out["ok"] = False
        elif r["decode_steps"] and 2 * full < r["decode_steps"]:
            out["problems"].append(
                f"rank {r['rank']}: {full} of {r['decode_steps']} decode steps had all {concurrency} streams "
                "decoding (the streams hardly overlapped: the share is not that of a batch of "
                f"{concurrency})")
            out["ok"] = False
