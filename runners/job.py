"""One job: build or reuse the engine a spec describes, run the probes around it, return a
JobResult (runners.contract). A short director over stages, each a method of JobDirector:

    prepare          validate the spec, build or reuse the engine (runners/builder)
    before engine    probes of stage "before" (comm latency, memory bandwidth): the GPUs are free
    with the engine  start it, run the probes of stage "engine" (decode, correctness, profiler)
    after engine     probes of stage "after" (share, weights), what took effect, the result

Which probes run, and what they need from the engine, is the registry's (runners/probes/registry.py).

`python -m runners execute spec.json` runs a job without the service (an offline GPU host);
the result file can be imported into the service later (`manage.py bench_import`).
"""
import json
import sys
import time
from pathlib import Path
from typing import Callable

from . import hostinfo
from .analysis.evidence import took_effect
from .builder.config import BuildConfig
from .builder.errors import BuildFailure
from .builder.overlay import overlay_env
from .builder.prepare import prepare_engine
from .config import RunnerConfig
from .contract import (BUILD_LOG, BUILD_LOG_ARTIFACT, SERVER_LOG, ArtifactRef, BuildInfo, EngineInfo, HostInfo,
                       JobResult, JobSpec, PhaseTime, SpecError, TookEffect)
from .engine import Engine, EngineSpec
from .outputs.artifacts import file_artifact, inline_for_file, text_artifact
from .outputs.livelog import LiveLog
from .probes.comm.latency import model_config
from .probes.registry import ProbeContext, ProbeOutput, load_probe_modules, selected_probes

class JobError(RuntimeError):
    """The job failed; `artifacts` keeps what was collected (the server log above all, by path),
    `failure_kind` says where (contract.FAILURE_KINDS) and `build` what was built, if anything."""

    def __init__(self, message: str, artifacts: list[dict], failure_kind: str = "engine", build: dict | None = None):
        super().__init__(message)
        self.artifacts = artifacts
        self.failure_kind = failure_kind
        self.build = build or {}


def _build_log(text: str) -> list[dict]:
    return [text_artifact(BUILD_LOG, BUILD_LOG_ARTIFACT, text)] if text else []


def job_spec(spec: JobSpec | dict) -> JobSpec:
    """SPEC as the contract's JobSpec: the worker's one validation of what it is sent (the web side
    validated it once, when it made it); a spec the contract refuses fails the job as a build."""
    if isinstance(spec, JobSpec):
        return spec
    load_probe_modules()  # the built-in probes' names, for a library caller that loaded none (once per process)
    try:
        return JobSpec.from_dict(spec)
    except (SpecError, ValueError) as exc:
        raise JobError(f"building engine: {exc}", [], "build") from exc


def _prepare(job: JobSpec, *, runner_config: RunnerConfig, cache_dir: Path | None, build_config: BuildConfig | None,
             report, live: LiveLog):
    """Build (or reuse) the spec's engine."""
    try:
        config = build_config or BuildConfig.from_runner_config(runner_config, cache_dir=cache_dir)
    except (SpecError, ValueError) as exc:
        raise JobError(f"building engine: {exc}", [], "build") from exc
    if job.engine.kind == "git" or job.patches:
        report("building engine")
    try:
        return prepare_engine(job, config, report, log=live.build_lines)
    except BuildFailure as exc:
        build = {"path": "", "repo": job.engine.repo, "ref": job.engine.ref, "commit": job.engine.commit or exc.commit}
        raise JobError(f"building engine: {exc}", _build_log(exc.log), exc.kind, build) from exc


def _server_log(engine: Engine | None) -> list[dict]:
    """The whole log, by path: the worker streams it into the artifact storage."""
    path = engine.log_path if engine is not None else None
    if path is None or not Path(path).exists():
        return []
    return [file_artifact(SERVER_LOG, "vllm-serve.log", path)]


def _took_effect(engine: Engine | None, spec: JobSpec) -> TookEffect | None:
    """Evidence from the engine's own start-up log that each setting of the variant was applied
    (runners.analysis.evidence); read after the timed decode, so it cannot disturb it."""
    path = engine.log_path if engine is not None else None
    if path is None or not Path(path).exists():
        return None
    report = took_effect(Path(path).read_text(errors="replace"), engine_args=list(spec.engine_args),
                         engine_env=dict(spec.engine_env), tensor_parallel_size=int(spec.tensor_parallel_size))
    return TookEffect.from_dict(report)


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


class JobDirector:
    """Runs one job's stages in order and keeps what each left: the phase the run is in (a
    failure names it), the engine, the probes' outputs and how long each phase took."""

    def __init__(self, spec: JobSpec, *, work_dir: Path, report: Callable[..., None], live: LiveLog,
                 runner_config: RunnerConfig):
        self.spec, self.work_dir, self.report, self.live = spec, work_dir, report, live
        self.runner_config = runner_config
        self.probes = selected_probes(spec)
        self.phase, self.phases, self._since = "starting engine", [], None
        self.engine: Engine | None = None
        self.prepared = None
        self.build_artifacts: list[dict] = []
        self.ctx: ProbeContext | None = None

    def enter(self, phase: str, state: str | None = None) -> None:
        self._close_phase()
        self.phase = phase
        self.report(phase) if state is None else self.report(phase, state)

    def _close_phase(self) -> None:
        now = time.monotonic()
        if self._since is not None:
            self.phases.append(PhaseTime(self.phase, round(now - self._since, 3)))
        self._since = now

    def prepare(self, *, cache_dir: Path | None, build_config: BuildConfig | None) -> None:
        self.prepared = _prepare(self.spec, runner_config=self.runner_config, cache_dir=cache_dir,
                                 build_config=build_config, report=self.report, live=self.live)
        self.build_artifacts = _build_log(self.prepared.log)

    def _context(self) -> ProbeContext:
        spec = self.spec
        args = [*spec.engine_args, *(a for probe in self.probes for a in probe.engine_args(spec, self.work_dir))]
        env = dict(spec.engine_env)
        if self.prepared.pythonpath:
            env.update(overlay_env(Path(self.prepared.pythonpath), self.runner_config.engine_env(env)))
        return ProbeContext(spec=spec, work_dir=self.work_dir, engine_args=args, engine_env=env,
                            model_config=model_config(spec.model), timeout_s=self.runner_config.probe_timeout_s,
                            runner_config=self.runner_config)

    def run_stage(self, stage: str) -> None:
        for probe in (p for p in self.probes if p.stage == stage):
            if probe.phase:
                self.enter(probe.phase)
            self.ctx.outputs[probe.name] = self._run_probe(probe)

    def _run_probe(self, probe) -> ProbeOutput:
        try:
            return probe.run(self.ctx)
        except Exception:
            if self.engine is not None and probe.stage == "engine":
                _check_engine_after_probe_error(self.engine)  # a dead engine is the real cause: report that
            raise

    def _start_engine(self) -> Engine:
        self.enter("starting engine", "RUNNING")
        ctx, spec = self.ctx, self.spec
        engine_spec = EngineSpec(model=spec.model, tensor_parallel_size=int(spec.tensor_parallel_size),
                                 args=ctx.engine_args, env=ctx.engine_env, startup_timeout_s=float(spec.startup_timeout_s),
                                 log_path=self.work_dir / "vllm-serve.log")
        self.engine = Engine(engine_spec, config=self.runner_config)
        ctx.engine, ctx.served_model = self.engine, engine_spec.served_model_name
        self.live.engine_log = engine_spec.log_path
        return self.engine

    def run_engine_stages(self) -> None:
        """Before the engine, then with it; any failure ends the job (JobError, with the phase)."""
        try:
            self.ctx = self._context()
            self.run_stage("before")
            with self._start_engine():
                self.run_stage("engine")
                self.engine.check_alive()
                self.enter("stopping engine")
        except Exception as exc:
            raise self.failure(exc) from exc

    def failure(self, exc: Exception) -> JobError:
        engine = self.engine
        tail = getattr(exc, "log_tail", "") or (engine.log_tail() if engine is not None else "")
        message = f"{self.phase}: {exc}"
        if tail:
            message += f"\n--- last engine log lines ---\n{tail}"
        probing = self.phase.startswith(("probing", "profiling")) and not hasattr(exc, "log_tail")
        return JobError(message, [*self.build_artifacts, *_server_log(engine)], "probe" if probing else "engine",
                        self.prepared.info)

    def result(self) -> JobResult:
        """After the engine: the probes that read the others' outputs, then the result."""
        self.run_stage("after")
        self._close_phase()
        outputs = [self.ctx.outputs[p.name] for p in self.probes if p.name in self.ctx.outputs]
        engine = self.engine
        return JobResult(
            run_id=self.spec.run_id,
            engine=EngineInfo(startup_s=round(engine.startup_s, 2), version=getattr(engine, "version", None)),
            build=BuildInfo.from_dict(self.prepared.info),
            took_effect=_took_effect(engine, self.spec),
            measurements=[m for out in outputs for m in out.measurements],
            artifacts=[*map(ArtifactRef.from_dict, [*self.build_artifacts, *_server_log(engine)]),
                       *(a for out in outputs for a in out.artifacts)],
            host=HostInfo.from_dict(hostinfo.host_info()),
            phases=self.phases,
            notes=[n for out in outputs for n in out.notes],
        )


def run_job(spec: JobSpec | dict, *, work_dir: Path, report: Callable[..., None] = lambda *a, **k: None,
            cache_dir: Path | None = None, build_config: BuildConfig | None = None,
            live: LiveLog | None = None, runner_config: RunnerConfig | None = None) -> JobResult:
    """Run one job: the probes SPEC lists (`probes`, default all that apply; runners/probes).
    LIVE (runners.outputs.livelog) follows the build's and the engine's logs while the job runs.
    RUNNER_CONFIG: the entry point's (runners/config.py); a library caller without one gets from_env()."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    director = JobDirector(job_spec(spec), work_dir=work_dir, report=report,
                           live=live if live is not None else LiveLog(),
                           runner_config=runner_config if runner_config is not None else RunnerConfig.from_env())
    director.prepare(cache_dir=cache_dir, build_config=build_config)
    director.run_engine_stages()
    return director.result()


def add_arguments(parser):
    parser.add_argument("spec", type=Path, help="job spec JSON (what the service sends a worker)")
    parser.add_argument("--work-dir", type=Path, default=Path("var/work/cli"))
    parser.add_argument("--out", type=Path, help="write the result JSON here instead of stdout")


def main(args) -> int:
    spec = json.loads(args.spec.read_text())
    runner_config = RunnerConfig.from_env()
    load_probe_modules(runner_config.probe_modules)

    def report(phase, state=None):
        print(f"[{time.strftime('%H:%M:%S')}] {phase}", file=sys.stderr)

    try:
        result = run_job(spec, work_dir=args.work_dir, report=report, runner_config=runner_config)
    except JobError as exc:
        print(f"job failed: {exc}", file=sys.stderr)
        return 1
    result.artifacts = [ArtifactRef.from_dict(a) for a in inline_for_file([a.to_dict() for a in result.artifacts])]
    text = json.dumps(result.to_dict(), indent=1)  # readable on the host that imports it
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0
