"""The built-in probes, registered in the order runners.job runs each stage and lists their
measurements and artifacts: decode, correctness, allreduce (profiler), comm, share, membw,
weights. See registry.py for the protocol; each class says what it measures."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Callable

from runners import contract, workloads
from runners.analysis import floor
from runners.analysis import share as comm_share
from runners.outputs.artifacts import file_artifact, text_artifact
from runners.contract import (AGGREGATE_TOK_S, DECODE_TOK_S, GREEDY_ARTIFACT, ITL_MS_P50, ITL_MS_P90, ITL_MS_P99,
                              SLOWEST_STREAM_TOK_S, TTFT_MS, ArtifactRef, JobSpec, Measurement, WorkloadPoint, measurement)

from . import membw
from .allreduce import expected_allreduce_calls, measure_allreduce_share, profiler_engine_args
from .comm import latency as comm_probe
from .correctness import greedy_completion
from .decode import measure_decode
from .streams import measure_point as measure_streams
from .registry import ProbeBase, ProbeContext, ProbeOutput, register


def _metrics(*names: str) -> tuple[contract.Metric, ...]:
    return tuple(contract.METRICS[name] for name in names)


def _typed(measurements: list[dict]) -> list[Measurement]:
    return [Measurement.from_dict(m, i) for i, m in enumerate(measurements)]


def _json_artifact(name: str, doc, indent: int | None = 1) -> ArtifactRef:
    return ArtifactRef.from_dict(text_artifact("probe_json", name, json.dumps(doc, indent=indent)))


def secondary(probe: Callable[[], dict]) -> dict:
    """Run a probe whose failure must not cost the run its decode figures: the error is kept
    in its document (and the measurements it would give are left out)."""
    try:
        return probe()
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed: it lands in the artifact
        return {"error": f"{type(exc).__name__}: {exc}", "problems": [str(exc)]}


def _tensor_parallel(spec: JobSpec) -> bool:
    return int(spec.tensor_parallel_size) >= 2


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


def profiler_traces(profile: dict | None) -> list[dict]:
    """The profiler's trace files (one per rank, tens to hundreds of MB), by path, for Perfetto."""
    paths = (profile or {}).get("trace_files") or []
    return [file_artifact("profiler_trace", Path(p).name, p) for p in paths if Path(p).is_file()]


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


def _engine_log(ctx: ProbeContext) -> str:
    path = getattr(ctx.engine, "log_path", None)
    return Path(path).read_text(errors="replace") if path is not None and Path(path).is_file() else ""


PRIMED_NOTE = ("steady decode at {points}: each stream's prompt was prefilled before its timed request and served "
               "from the prefix cache (prefill 'primed'); the TTFT there is the cold prefill of all the streams' "
               "prompts sent at once")


class DecodeProbe(ProbeBase):
    """Streamed greedy decode at each workload point, in one engine start: tok/s, TTFT,
    inter-token latency (every job). The first point's document is decode.json (and what later
    probes read); a point the engine cannot hold is skipped with a note (runners/workloads.py)."""
    name, stage, phase, always = "decode", "engine", "probing decode", True
    metrics = _metrics(DECODE_TOK_S, TTFT_MS, ITL_MS_P50, ITL_MS_P90, ITL_MS_P99)

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]:
        return workloads.engine_args(spec)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        several = len(ctx.spec.workloads) > 1  # a single point runs as it always did: its errors fail the job
        kv_tokens = workloads.kv_capacity_tokens(_engine_log(ctx)) if several else None
        out, first, primed = ProbeOutput(), ctx.spec.default_point, []
        for point in ctx.spec.workloads:
            skipped = several and workloads.skip_reason(point, args=ctx.engine_args, kv_tokens=kv_tokens)
            if skipped:
                out.notes.append(skipped)
                continue
            decode = measure_point(ctx, point)
            out.measurements += [replace(m, point=point.id) for m in _typed(decode_measurements(decode))]
            out.artifacts.append(_json_artifact("decode.json" if point == first else f"decode-{point.id}.json", decode))
            primed += [point.id] if decode.get("prefill") == "primed" else []
            if point == first:
                out.raw = decode
        if primed:
            out.notes.append(PRIMED_NOTE.format(points=", ".join(primed)))
        return out


class CorrectnessProbe(ProbeBase):
    """A greedy request with top-5 logprobs; the service judges it against the reference."""
    name, stage, phase = "correctness", "engine", "probing correctness"

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        greedy = greedy_completion(base_url=ctx.base_url, model=ctx.served_model, prompt=ctx.spec.prompt,
                                   max_tokens=int(ctx.spec.max_tokens), timeout_s=2.5 * ctx.timeout_s)  # 300 s by default
        return ProbeOutput(artifacts=[_json_artifact(GREEDY_ARTIFACT, greedy, indent=None)] if greedy else [], raw=greedy)


class AllreduceProbe(ProbeBase):
    """The profiler's allreduce share of each decode step (tensor parallelism only), at each
    workload point the engine can hold: the point's streams at once under one profiler session.
    The first point's document is allreduce.json, and its measurements come with the share
    probe (which also has the decode and comm figures); every other point's share, calls per
    step and us per call are measurements of that point here, from a short window
    (POINT_WINDOW_TOKENS) so the extra sessions cost little."""
    name, stage, phase = "allreduce", "engine", "profiling allreduce"
    FIRST_WINDOW_TOKENS, POINT_WINDOW_TOKENS = 64, 16

    def applies(self, spec: JobSpec) -> bool:
        return _tensor_parallel(spec)

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]:
        return profiler_engine_args(Path(work_dir) / "traces")

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        several = len(ctx.spec.workloads) > 1
        kv_tokens = workloads.kv_capacity_tokens(_engine_log(ctx)) if several else None
        out, first = ProbeOutput(), ctx.spec.default_point
        for point in ctx.spec.workloads:
            if several and workloads.skip_reason(point, args=ctx.engine_args, kv_tokens=kv_tokens):
                continue  # the decode probe's note says why
            profile = self.profile_point(ctx, point, first=point == first)
            if point == first:
                out.raw = profile
            else:
                out.measurements += [replace(m, point=point.id)
                                     for m in _typed(comm_share.profiler_measurements(profile))]
            out.artifacts.append(_json_artifact("allreduce.json" if point == first else f"allreduce-{point.id}.json",
                                                profile))
            if point == first:  # tens to hundreds of MB a rank: the other points keep their figures only
                out.artifacts += map(ArtifactRef.from_dict, profiler_traces(profile))
        return out

    def profile_point(self, ctx: ProbeContext, point: WorkloadPoint, *, first: bool) -> dict:
        """One profiler session of POINT; the first point's window is the one it always had."""
        tp, config, spec = int(ctx.spec.tensor_parallel_size), ctx.model_config, ctx.spec
        window = min(self.FIRST_WINDOW_TOKENS, int(spec.max_tokens)) if first else \
            min(self.POINT_WINDOW_TOKENS, point.max_tokens)
        return secondary(lambda: measure_allreduce_share(
            base_url=ctx.base_url, model=ctx.served_model, trace_dir=Path(ctx.work_dir) / "traces",
            prompt=spec.prompt, max_tokens=window, expected_ranks=tp,
            expected_calls=expected_allreduce_calls(config, tensor_parallel_size=tp) if config else None,
            concurrency=point.concurrency, prompt_tokens=point.prompt_tokens,
        ))


class CommProbe(ProbeBase):
    """Allreduce latency at the model's hidden size, before the engine starts (the GPUs are
    free); tensor parallelism and a local model config only."""
    name, stage, phase = "comm", "before", "probing comm"

    def applies(self, spec: JobSpec) -> bool:
        return _tensor_parallel(spec) and comm_probe.model_config(spec.model) is not None

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        config, args, tp = ctx.model_config, ctx.engine_args, int(ctx.spec.tensor_parallel_size)
        comm = secondary(lambda: comm_probe.comm_latency(
            tensor_parallel_size=tp, hidden_size=config["hidden_size"], dtype=comm_probe.comm_dtype(config, args),
            env=ctx.runner_config.engine_env(ctx.engine_env) if ctx.runner_config else ctx.engine_env, graph="--enforce-eager" not in args, config=config,
            custom_allreduce=tp in (2, 4, 6, 8) and "--disable-custom-all-reduce" not in args,
        ))
        return ProbeOutput(artifacts=[_json_artifact("comm.json", comm)] if comm else [], raw=comm)


class ShareProbe(ProbeBase):
    """The allreduce share, profiled and analytic, and the ceiling 'tok/s if allreduce were
    free', from the decode, allreduce and comm probes' documents (runners.analysis.share)."""
    name, stage, selected_with = "share", "after", ("comm", "allreduce")
    metrics = _metrics(contract.ALLREDUCE_SHARE, contract.ALLREDUCE_CALLS_PER_STEP, contract.ALLREDUCE_US_PER_CALL,
                       contract.LAUNCH_GAP_MS, contract.ALLREDUCE_SHARE_ANALYTIC, contract.COMM_US_PER_CALL,
                       contract.CEILING_TOK_S)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        decode = ctx.raw("decode")
        if not decode:
            return ProbeOutput()
        return ProbeOutput(measurements=_typed(comm_share.share_measurements(
            decode_tok_s=decode["decode_tok_s"], profile=ctx.raw("allreduce"), comm=ctx.raw("comm"))))


class MembwProbe(ProbeBase):
    """A device-to-device copy's bandwidth, before the engine starts: the memory-bandwidth
    floor of a decode step."""
    name, stage, phase = "membw", "before", "measuring memory bandwidth"
    metrics = _metrics(contract.MEM_BANDWIDTH_GB_S)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        bandwidth = secondary(membw.copy_bandwidth_isolated)
        return ProbeOutput(measurements=_typed(membw.bandwidth_measurements(bandwidth)), raw=bandwidth)


class WeightsProbe(ProbeBase):
    """The weight bytes each GPU reads per token, from a local model directory, and the KV-cache
    bytes per token of context from its config.json (every job): the floor's bytes."""
    name, stage, always = "weights", "after", True
    metrics = _metrics(contract.WEIGHT_BYTES_PER_GPU, contract.KV_BYTES_PER_TOKEN)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        tp = int(ctx.spec.tensor_parallel_size)
        found = membw.weight_measurements(model=ctx.spec.model, tensor_parallel_size=tp)
        kv_dtype = workloads.flag_value(list(ctx.engine_args or ()), "--kv-cache-dtype")
        kv = floor.kv_bytes_per_token(ctx.model_config, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype) \
            if ctx.model_config else None
        if kv:
            found.append(contract.measurement(contract.KV_BYTES_PER_TOKEN, kv, details={
                "how": f"K and V of every layer per token, config.json of {ctx.spec.model}, tensor parallel size "
                       f"{tp}, KV cache dtype {kv_dtype or 'the model dtype'}"}))
        return ProbeOutput(measurements=_typed(found))


for _probe in (DecodeProbe(), CorrectnessProbe(), AllreduceProbe(), CommProbe(), ShareProbe(), MembwProbe(),
               WeightsProbe()):
    register(_probe)
