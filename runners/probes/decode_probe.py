"""The decode probe as a plug-in: streamed greedy decode at each workload point, in one engine
start (every job). Its metrics, the measurements built from its documents, and the choice of
method per point: a single stream of the benchmark's prompt text is runners.probes.decode's
measure_decode, any other point runners.probes.streams' measure_point."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from runners import contract, workloads
from runners.contract import (AGGREGATE_TOK_S, DECODE_TOK_S, ITL_MS_P50, ITL_MS_P90, ITL_MS_P99, SLOWEST_STREAM_TOK_S,
                              TTFT_MS, JobSpec, Metric, WorkloadPoint, measurement)

from .decode import measure_decode
from .probe_kit import json_artifact, points_to_run, typed
from .registry import ProbeBase, ProbeContext, ProbeOutput, register
from .streams import measure_point as measure_streams

METRICS = (
    Metric(DECODE_TOK_S, "tok/s", "higher", "decode throughput"),
    # At concurrency N: the lowest clean stream, and all streams' tokens over the repeat's span.
    Metric(SLOWEST_STREAM_TOK_S, "tok/s", "higher", "slowest stream's decode throughput"),
    Metric(AGGREGATE_TOK_S, "tok/s", "higher", "aggregate decode throughput (all streams)"),
    Metric(TTFT_MS, "ms", "lower", "time to first token"),
    Metric(ITL_MS_P50, "ms", "lower", "inter-token latency p50"),
    Metric(ITL_MS_P90, "ms", "lower", "inter-token latency p90"),
    Metric(ITL_MS_P99, "ms", "lower", "inter-token latency p99"),
)

PRIMED_NOTE = ("steady decode at {points}: each stream's prompt was prefilled before its timed request and served "
               "from the prefix cache (prefill 'primed'); the TTFT there is the cold prefill of all the streams' "
               "prompts sent at once")


def decode_measurements(decode: dict) -> list[dict]:
    """The decode probe's figures; each of a primed point (streams prefilled before the timed
    window) names that method (contract.METHOD_KEY), so it starts its own series."""
    samples = decode["samples"]
    itl = decode["itl_ms"]
    out = [
        {**measurement(
            DECODE_TOK_S,
            decode["decode_tok_s"],
            samples=[s["decode_tok_s"] for s in samples],
            ci=decode.get("decode_tok_s_ci"),
            details={
                "output_digest": decode.get("output_digest"),
                "tokens_per_repeat": [s["n_tokens"] for s in samples],
                "server_itl_ms_mean": decode.get("server_itl_ms_mean"),
                "client_itl_ms_mean": decode.get("client_itl_ms_mean"),
                "server_agreement": decode.get("server_agreement"),
                "warnings": decode.get("warnings", []),
                "notes": decode.get("notes", []),
                "host": decode.get("host"),
                "repeats_made": decode.get("repeats_made", len(samples)),
                "repeats_clean": decode.get("repeats_clean"),
                "prefill": decode.get("prefill"),
            },
        ), "sample_flags": [s.get("flag", "") for s in samples]},
        {**measurement(TTFT_MS, decode["ttft_ms"], samples=[s["ttft_ms"] for s in samples]),
         "sample_flags": [s.get("ttft_flag", "") for s in samples]},
        *(measurement(name, itl[p]) for name, p in ((ITL_MS_P50, "p50"), (ITL_MS_P90, "p90"), (ITL_MS_P99, "p99"))),
        *(measurement(name, decode[name]) for name in (SLOWEST_STREAM_TOK_S, AGGREGATE_TOK_S)
          if decode.get(name) is not None and "streams" in decode),  # a workload point's
    ]
    if decode.get("prefill") == "primed":
        for m in out:
            m["details"][contract.METHOD_KEY] = "primed"
    return out


def measure_point(ctx: ProbeContext, point: WorkloadPoint) -> dict:
    """The decode probe's document for one workload point. A
    single stream of the benchmark's prompt text is today's measure_decode, exactly; other points
    go to the multi-stream probe (runners/probes/streams.py), open-loop at the point's request_rate."""
    spec = ctx.spec
    args = dict(base_url=ctx.base_url, model=ctx.served_model, prompt=spec.prompt, max_tokens=point.max_tokens,
                repeats=int(spec.repeats), warmup=int(spec.warmup), timeout_s=ctx.timeout_s)
    if point.concurrency == 1 and point.prompt_tokens is None:
        return measure_decode(**args)
    return measure_streams(**args, concurrency=point.concurrency, prompt_tokens=point.prompt_tokens,
                           request_rate=point.request_rate)


class DecodeProbe(ProbeBase):
    """Streamed greedy decode at each workload point, in one engine start: tok/s, TTFT,
    inter-token latency (every job). The first point's document is decode.json (and what later
    probes read); a point the engine cannot hold is skipped with a note (runners/workloads.py)."""
    name, stage, phase, always = "decode", "engine", "probing decode", True
    metrics = METRICS

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]:
        return workloads.engine_args(spec)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        out, first, primed = ProbeOutput(), ctx.spec.default_point, []
        for point, skipped in points_to_run(ctx):
            if skipped:
                out.notes.append(skipped)
                continue
            decode = measure_point(ctx, point)
            out.measurements += [replace(m, point=point.id) for m in typed(decode_measurements(decode))]
            out.artifacts.append(json_artifact("decode.json" if point == first else f"decode-{point.id}.json", decode))
            primed += [point.id] if decode.get("prefill") == "primed" else []
            if point == first:
                out.raw = decode
        if primed:
            out.notes.append(PRIMED_NOTE.format(points=", ".join(primed)))
        return out


PROBE = register(DecodeProbe())
