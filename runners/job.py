"""One job: start the engine a spec describes, run the probes, stop it, return plain JSON.

`python -m runners execute spec.json` runs a job without the service (an offline GPU host);
the result file can be imported into the service later (`manage.py bench_import`).
"""
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from . import membw
from .analysis import share as comm_share
from .analysis.evidence import took_effect
from .artifacts import file_artifact, inline_for_file, text_artifact
from .build.config import BuildConfig
from .build.errors import BuildFailure
from .build.overlay import overlay_env
from .build.prepare import prepare_engine
from .envvars import env_float
from .contract import (BUILD_LOG_ARTIFACT, DECODE_TOK_S, GREEDY_ARTIFACT, ITL_MS_P50, ITL_MS_P90, ITL_MS_P99,
                       TTFT_MS, JobSpec, SpecError, measurement)
from .engine import Engine, EngineSpec
from .probes.correctness import greedy_completion
from .probes.allreduce import expected_allreduce_calls, measure_allreduce_share, profiler_engine_args
from .probes.decode import measure_decode

# How long a probe waits for the engine's next bytes: a hung engine fails the run this soon.
PROBE_TIMEOUT_S_DEFAULT = 120.0


class JobError(RuntimeError):
    """The job failed; `artifacts` keeps what was collected (the server log above all, by path),
    `failure_kind` says where (contract.FAILURE_KINDS) and `build` what was built, if anything."""

    def __init__(self, message: str, artifacts: list[dict], failure_kind: str = "engine", build: dict | None = None):
        super().__init__(message)
        self.artifacts = artifacts
        self.failure_kind = failure_kind
        self.build = build or {}


def _build_log(text: str) -> list[dict]:
    return [text_artifact("build_log", BUILD_LOG_ARTIFACT, text)] if text else []


def _prepare(spec: dict, *, work_dir: Path, cache_dir: Path | None, build_config: BuildConfig | None, report):
    """Validate the spec against the contract and build (or reuse) its engine."""
    try:
        job = JobSpec.from_dict(spec)
        config = build_config or BuildConfig.from_env(
            cache_dir=cache_dir or os.environ.get("BENCH_BUILD_CACHE_DIR") or work_dir.parent / "build-cache")
    except (SpecError, ValueError) as exc:
        raise JobError(f"building engine: {exc}", [], "build") from exc
    if job.engine.kind == "git" or job.patches:
        report("building engine")
    try:
        return prepare_engine(job, config, report)
    except BuildFailure as exc:
        build = {"path": "", "repo": job.engine.repo, "ref": job.engine.ref, "commit": job.engine.commit}
        raise JobError(f"building engine: {exc}", _build_log(exc.log), exc.kind, build) from exc


def decode_measurements(decode: dict) -> list[dict]:
    samples = decode["samples"]
    itl = decode["itl_ms"]
    return [
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
                "repeats_made": decode.get("repeats_made", len(samples)),
                "repeats_clean": decode.get("repeats_clean"),
            },
        ), "sample_flags": [s.get("flag", "") for s in samples]},
        {**measurement(TTFT_MS, decode["ttft_ms"], samples=[s["ttft_ms"] for s in samples]),
         "sample_flags": [s.get("ttft_flag", "") for s in samples]},
        *(measurement(name, itl[p]) for name, p in ((ITL_MS_P50, "p50"), (ITL_MS_P90, "p90"), (ITL_MS_P99, "p99"))),
    ]


def _server_log(engine: Engine | None) -> list[dict]:
    """The whole log, by path: the worker streams it into the artifact storage."""
    path = engine.log_path if engine is not None else None
    if path is None or not Path(path).exists():
        return []
    return [file_artifact("server_log", "vllm-serve.log", path)]


def _profiler_traces(profile: dict | None) -> list[dict]:
    """The profiler's trace files (one per rank, tens to hundreds of MB), by path, for Perfetto."""
    paths = (profile or {}).get("trace_files") or []
    return [file_artifact("profiler_trace", Path(p).name, p) for p in paths if Path(p).is_file()]


def _took_effect(engine: Engine | None, spec: dict) -> dict:
    """Evidence from the engine's own start-up log that each setting of the variant was applied
    (runners.analysis.evidence); read after the timed decode, so it cannot disturb it."""
    path = engine.log_path if engine is not None else None
    if path is None or not Path(path).exists():
        return {}
    return took_effect(Path(path).read_text(errors="replace"), engine_args=list(spec.get("engine_args", [])),
                       engine_env=dict(spec.get("engine_env", {})),
                       tensor_parallel_size=int(spec.get("tensor_parallel_size", 1)))


def _secondary(probe: Callable[[], dict]) -> dict:
    """Run a probe whose failure must not cost the run its decode figures: the error is kept
    in the result (and the measurements it would give are left out)."""
    try:
        return probe()
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed: it lands in the artifact
        return {"error": f"{type(exc).__name__}: {exc}", "problems": [str(exc)]}


def _check_engine_after_probe_error(engine: Engine, settle_s: float = 3.0) -> None:
    """Raise the engine's EngineError if it died. A stream cut by a dying engine reaches the
    probe before its guard has finished clearing the group: give the exit a moment to land."""
    deadline = time.monotonic() + settle_s
    while engine.running and time.monotonic() < deadline:
        try:
            engine.check_alive(health=True)
            return  # alive and healthy: the probe's own error stands
        except Exception:  # noqa: BLE001 - unhealthy or exiting: look again until it settles
            time.sleep(0.2)
    engine.check_alive()


def run_job(spec: dict, *, work_dir: Path, report: Callable[..., None] = lambda *a, **k: None,
            cache_dir: Path | None = None, build_config: BuildConfig | None = None) -> dict:
    """Probes (`spec["probes"]`, default all that apply): `decode` always; `correctness` (a
    greedy request with top-5 logprobs, judged against the reference by the service); with
    tensor parallelism `comm` (allreduce latency at the model's hidden size, before the engine
    starts, while the GPUs are free) and `allreduce` (the profiler's share of each step);
    `membw` (a device-to-device copy's bandwidth, before the engine starts: the time budget's
    memory-bandwidth floor, with the weight bytes per GPU of a local model directory)."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    tp = int(spec.get("tensor_parallel_size", 1))
    probes = set(spec.get("probes") or ("decode", "correctness", "comm", "allreduce", "membw"))
    if tp < 2:
        probes -= {"comm", "allreduce"}
    config = comm_share.model_config(spec["model"])
    args = list(spec.get("engine_args", []))
    trace_dir = work_dir / "traces"
    if "allreduce" in probes:
        args += profiler_engine_args(trace_dir)
    engine = None
    comm = profile = bandwidth = None
    probe_timeout_s = env_float("BENCH_PROBE_TIMEOUT_S", PROBE_TIMEOUT_S_DEFAULT, minimum=0.5)
    prepared = _prepare(spec, work_dir=work_dir, cache_dir=cache_dir, build_config=build_config, report=report)
    build_artifacts = _build_log(prepared.log)
    phase = "starting engine"
    try:
        env = dict(spec.get("engine_env", {}))
        if prepared.pythonpath:
            env.update(overlay_env(Path(prepared.pythonpath), {**os.environ, **env}))
        if "comm" in probes and config:
            phase = "probing comm"
            report(phase)
            comm = _secondary(lambda: comm_share.comm_latency(
                tensor_parallel_size=tp, hidden_size=config["hidden_size"], dtype=comm_share.comm_dtype(config, args),
                env=env, graph="--enforce-eager" not in args, config=config,
                custom_allreduce=tp in (2, 4, 6, 8) and "--disable-custom-all-reduce" not in args,
            ))
        if "membw" in probes:  # the floor's bandwidth, while the device is free
            phase = "measuring memory bandwidth"
            report(phase)
            bandwidth = _secondary(membw.copy_bandwidth_isolated)
        phase = "starting engine"
        engine_spec = EngineSpec(
            model=spec["model"],
            tensor_parallel_size=tp,
            args=args,
            env=env,
            startup_timeout_s=float(spec.get("startup_timeout_s", 600)),
            log_path=work_dir / "vllm-serve.log",
        )
        engine = Engine(engine_spec)
        report(phase, "RUNNING")
        with engine:
            phase = "probing decode"
            report(phase)
            try:
                decode = measure_decode(
                    base_url=engine.base_url,
                    model=engine_spec.served_model_name,
                    prompt=spec["prompt"],
                    max_tokens=int(spec["max_tokens"]),
                    repeats=int(spec["repeats"]),
                    warmup=int(spec.get("warmup", 1)),
                    timeout_s=probe_timeout_s,
                )
            except Exception:
                _check_engine_after_probe_error(engine)  # a dead engine is the real cause: report that
                raise
            greedy = None
            if "correctness" in probes:
                phase = "probing correctness"
                report(phase)
                greedy = greedy_completion(base_url=engine.base_url, model=engine_spec.served_model_name,
                                           prompt=spec["prompt"], max_tokens=int(spec["max_tokens"]),
                                           timeout_s=2.5 * probe_timeout_s)  # 300 s by default
            if "allreduce" in probes:
                phase = "profiling allreduce"
                report(phase)
                profile = _secondary(lambda: measure_allreduce_share(
                    base_url=engine.base_url, model=engine_spec.served_model_name, trace_dir=trace_dir,
                    prompt=spec["prompt"], max_tokens=min(64, int(spec["max_tokens"])), expected_ranks=tp,
                    expected_calls=expected_allreduce_calls(config, tensor_parallel_size=tp) if config else None,
                ))
            engine.check_alive()
            phase = "stopping engine"
            report(phase)
    except Exception as exc:
        tail = getattr(exc, "log_tail", "") or (engine.log_tail() if engine is not None else "")
        message = f"{phase}: {exc}"
        if tail:
            message += f"\n--- last engine log lines ---\n{tail}"
        kind = "probe" if phase.startswith(("probing", "profiling")) and not hasattr(exc, "log_tail") else "engine"
        raise JobError(message, [*build_artifacts, *_server_log(engine)], kind, prepared.info) from exc
    return {
        "run_id": spec.get("run_id"),
        "engine": {"startup_s": round(engine.startup_s, 2), "version": getattr(engine, "version", None)},
        "build": prepared.info,
        "took_effect": _took_effect(engine, spec),
        "measurements": [
            *decode_measurements(decode),
            *comm_share.share_measurements(decode_tok_s=decode["decode_tok_s"], profile=profile, comm=comm),
            *membw.membw_measurements(bandwidth, model=spec["model"], tensor_parallel_size=tp),
        ],
        "artifacts": [
            *build_artifacts,
            *_server_log(engine),
            text_artifact("probe_json", "decode.json", json.dumps(decode, indent=1)),
            *([text_artifact("probe_json", GREEDY_ARTIFACT, json.dumps(greedy))] if greedy else []),
            *([text_artifact("probe_json", "allreduce.json", json.dumps(profile, indent=1))] if profile else []),
            *([text_artifact("probe_json", "comm.json", json.dumps(comm, indent=1))] if comm else []),
            *_profiler_traces(profile),
        ],
    }


def add_arguments(parser):
    parser.add_argument("spec", type=Path, help="job spec JSON (what the service sends a worker)")
    parser.add_argument("--work-dir", type=Path, default=Path("var/work/cli"))
    parser.add_argument("--out", type=Path, help="write the result JSON here instead of stdout")


def main(args) -> int:
    spec = json.loads(args.spec.read_text())

    def report(phase, state=None):
        print(f"[{time.strftime('%H:%M:%S')}] {phase}", file=sys.stderr)

    try:
        result = run_job(spec, work_dir=args.work_dir, report=report)
    except JobError as exc:
        print(f"job failed: {exc}", file=sys.stderr)
        return 1
    result["artifacts"] = inline_for_file(result["artifacts"])  # readable on the host that imports it
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0
