"""A finished run's phases as the four the histogram knows: build (BuildInfo.duration_s),
engine_start, probes (every probing phase of the run, added up) and storing (the web side)."""
from runners.contract import JobResult

from .instruments import PHASE_SECONDS

ENGINE_START = "starting engine"  # runners/job.py's names for the engine's own phases
ENGINE_STOP = "stopping engine"


def worker_phases(result: JobResult) -> dict[str, float]:
    """The worker's phases in the histogram's words; a probe's own phase name never becomes a label."""
    seconds: dict[str, float] = {}
    if result.build is not None and result.build.duration_s is not None:
        seconds["build"] = float(result.build.duration_s)
    for entry in result.phases:
        if entry.duration_s is None or entry.phase == ENGINE_STOP:
            continue
        key = "engine_start" if entry.phase == ENGINE_START else "probes"
        seconds[key] = seconds.get(key, 0.0) + float(entry.duration_s)
    return seconds


def observe_run(result: JobResult, *, pool: str, storing_s: float) -> None:
    for phase, seconds in {**worker_phases(result), "storing": storing_s}.items():
        PHASE_SECONDS.labels(phase=phase, pool=pool).observe(max(0.0, seconds))
