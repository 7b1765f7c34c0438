"""The allreduce share of a decode step as one plug-in of three probes (tensor parallelism only;
docs/methods/allreduce-share.md): `allreduce` profiles the engine's decode steps (engine stage),
`comm` times one allreduce at the model's hidden size before the engine starts, and `share`,
after the engine stops, turns the decode, allreduce and comm documents into the figures:
profiled, analytic, and the ceiling 'tok/s if allreduce were free'. Here are the probes, the
metrics they declare and the builders of their measurements; the measuring is
runners.probes.allreduce (a profiler session), runners.probes.trace (pure trace parsing) and
runners.probes.comm; the arithmetic is runners.analysis (analyze.decompose, share.headline_ceiling)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from runners.analysis.analyze import decompose
from runners.analysis.share import headline_ceiling
from runners.contract import (AB_ALLREDUCE_MS_DELTA, ALLREDUCE_CALLS_PER_STEP, ALLREDUCE_SHARE, ALLREDUCE_SHARE_ANALYTIC,
                              ALLREDUCE_US_PER_CALL, CEILING_TOK_S, COMM_US_PER_CALL, LAUNCH_GAP_MS, PROFILER_TRACE, ArtifactRef,
                              JobSpec, Metric, WorkloadPoint, measurement)
from runners.flags import has_flag
from runners.outputs.artifacts import file_artifact

from .allreduce import expected_allreduce_calls, measure_allreduce_share, profiler_engine_args
from .comm import latency as comm_latency
from .probe_kit import json_artifact, points_to_run, secondary, tensor_parallel, typed
from .registry import ProbeBase, ProbeContext, ProbeOutput, register

METRICS = (
    Metric(ALLREDUCE_SHARE, "", "lower", "allreduce share of a decode step"),
    Metric(ALLREDUCE_CALLS_PER_STEP, "", "lower", "allreduce calls per decode step"),
    Metric(ALLREDUCE_US_PER_CALL, "us", "lower", "allreduce time per call"),
    Metric(ALLREDUCE_SHARE_ANALYTIC, "", "lower", "allreduce share (analytic, comm probe)"),
    Metric(CEILING_TOK_S, "tok/s", "higher", "decode tok/s if allreduce were free"),
    Metric(COMM_US_PER_CALL, "us", "lower", "allreduce latency (comm probe)"),
    # Computed by the service (bench/lifecycle/checks.py) from neighbouring ladder steps' figures.
    Metric(AB_ALLREDUCE_MS_DELTA, "ms", "lower", "A/B allreduce ms per token vs neighbour"),
    Metric(LAUNCH_GAP_MS, "ms", "lower", "launch gaps per decode step (device idle between kernels)"),
)

# Profiler and analytic shares further apart than this (absolute) are flagged.
DISAGREEMENT = 0.10
# The TP sizes vLLM's custom allreduce kernel serves (its _SUPPORTED_WORLD_SIZES); others use NCCL.
CUSTOM_ALLREDUCE_WORLD_SIZES = (2, 4, 6, 8)


def share_measurements(*, decode_tok_s: float, profile: dict | None, comm: dict | None) -> list[dict]:
    """Measurements from the profiler result (allreduce probe) and the comm probe point."""
    step_ms = 1000.0 / decode_tok_s
    calls = profile.get("calls_per_step") if profile else None
    profiler_share = profile.get("share_min") if profile else None
    out = profiler_measurements(profile)
    if comm and "error" in comm:
        comm = None
    analytic = None
    if comm and calls:
        try:
            analytic = decompose(step_ms, calls, comm["us_per_call"])
        except ValueError as exc:
            comm = {**comm, "problem": str(exc)}
        if analytic:
            details = {"method": "analytic", "calls_per_step": calls, "comm": comm, "step_ms": step_ms,
                       "allreduce_ms_per_token": analytic["allreduce_ms_per_token"],
                       "compute_ms_per_token": analytic["compute_ms_per_token"]}
            if profiler_share is not None:
                details["profiler_share"] = profiler_share
                details["disagree"] = abs(analytic["allreduce_share"] - profiler_share) > DISAGREEMENT
            out.append(measurement(ALLREDUCE_SHARE_ANALYTIC, analytic["allreduce_share"], details=details))
            out.append(measurement(COMM_US_PER_CALL, comm["us_per_call"], details=comm))
    shares = {"profiler": profiler_share, "analytic": analytic["allreduce_share"] if analytic else None}
    ceiling = headline_ceiling(decode_tok_s, shares)
    if ceiling:
        out.append(measurement(CEILING_TOK_S, ceiling["tok_s"], details=ceiling))
    return out


def profiler_measurements(profile: dict | None) -> list[dict]:
    """The profiler's own figures (share, calls per step, us per call, launch gap) of one
    allreduce session; [] without a profile."""
    out: list[dict] = []
    if not profile:
        return out
    calls, profiler_share = profile.get("calls_per_step"), profile.get("share_min")
    details = {"method": "profiler", "share_max": profile.get("share_max"),
               "per_rank": [{k: r.get(k) for k in ("rank", "allreduce_share", "allreduce_us_per_call",
                                                   "allreduce_calls_per_step", "step_ms_median", "source")}
                            for r in profile.get("ranks", [])],
               "problems": profile.get("problems", []),
               "note": "lowest rank: the others include waiting for the slower rank",
               **{k: profile[k] for k in ("concurrency", "prompt_tokens") if k in profile}}  # a point's session
    if profiler_share is not None:
        out.append(measurement(ALLREDUCE_SHARE, profiler_share, details=details))
    if calls is not None:
        out.append(measurement(ALLREDUCE_CALLS_PER_STEP, calls,
                               details={"expected": profile.get("expected_calls_per_step")}))
    if profile.get("us_per_call_min") is not None:
        out.append(measurement(ALLREDUCE_US_PER_CALL, profile["us_per_call_min"], details={"method": "profiler"}))
    if profile.get("launch_gap_ms") is not None:
        out.append(measurement(LAUNCH_GAP_MS, profile["launch_gap_ms"],
                               details={"method": "profiler: decode step's kernel span minus its busy kernel time"}))
    return out


def profiler_traces(profile: dict | None) -> list[dict]:
    """The profiler's trace files (one per rank, tens to hundreds of MB), by path, for Perfetto."""
    paths = (profile or {}).get("trace_files") or []
    return [file_artifact(PROFILER_TRACE, Path(p).name, p) for p in paths if Path(p).is_file()]


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
        return tensor_parallel(spec)

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]:
        return profiler_engine_args(Path(work_dir) / "traces")

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        out, first = ProbeOutput(), ctx.spec.default_point
        for point, skipped in points_to_run(ctx):
            if skipped:
                continue  # the decode probe's note says why
            profile = self.profile_point(ctx, point, first=point == first)
            if point == first:
                out.raw = profile
            else:
                out.measurements += [replace(m, point=point.id)
                                     for m in typed(profiler_measurements(profile))]
            out.artifacts.append(json_artifact("allreduce.json" if point == first else f"allreduce-{point.id}.json",
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
        return tensor_parallel(spec) and comm_latency.model_config(spec.model) is not None

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        config, args, tp = ctx.model_config, ctx.engine_args, int(ctx.spec.tensor_parallel_size)
        comm = secondary(lambda: comm_latency.comm_latency(
            tensor_parallel_size=tp, hidden_size=config["hidden_size"], dtype=comm_latency.comm_dtype(config, args),
            env=ctx.runner_config.engine_env(ctx.engine_env) if ctx.runner_config else ctx.engine_env,
            graph=not has_flag(args, "--enforce-eager"), config=config,
            custom_allreduce=tp in CUSTOM_ALLREDUCE_WORLD_SIZES and not has_flag(args, "--disable-custom-all-reduce"),
        ))
        return ProbeOutput(artifacts=[json_artifact("comm.json", comm)] if comm else [], raw=comm)


class ShareProbe(ProbeBase):
    """The allreduce share, profiled and analytic, and the ceiling 'tok/s if allreduce were
    free', from the decode, allreduce and comm probes' documents (share_measurements)."""
    name, stage, selected_with = "share", "after", ("comm", "allreduce")
    metrics = METRICS

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        decode = ctx.raw("decode")
        if not decode:
            return ProbeOutput()
        return ProbeOutput(measurements=typed(share_measurements(
            decode_tok_s=decode["decode_tok_s"], profile=ctx.raw("allreduce"), comm=ctx.raw("comm"))))


ALLREDUCE, COMM, SHARE = register(AllreduceProbe()), register(CommProbe()), register(ShareProbe())
