"""Checks of the messages that arrive on the web queue from GPU workers.

Anyone who can write to the broker can send one, and a GPU host may run another checkout: a
message for an unknown run, with wrong types or oversized is logged and dropped (never
stored half, never retried). Each check raises BadMessage with the reason.
"""
import functools
import json
import logging
import math
import re

from .artifacts import MAX_INLINE_CHARS
from .models import Measurement, Run

log = logging.getLogger(__name__)

# Artifacts travel as references (bench/artifacts.py), never as files: a message stays small.
MAX_MESSAGE_CHARS = 2_000_000
MAX_ARTIFACTS = 50
MAX_MEASUREMENTS = 200
MAX_SAMPLES = 10_000
MAX_ERROR_CHARS = 200_000
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class BadMessage(ValueError):
    """The message cannot be acted on; the text says why."""


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise BadMessage(reason)


def _string(value, name: str, limit: int) -> str:
    _require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    _require(len(value) <= limit, f"{name} has {len(value)} characters (limit {limit})")
    return value


def _number(value, name: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    _require(ok, f"{name} is {value!r}, not a finite number")
    return value


def _optional_number(value, name: str):
    return None if value is None else _number(value, name)


def check_run(run_id) -> None:
    _require(isinstance(run_id, int) and not isinstance(run_id, bool), f"run id {run_id!r} is not an integer")
    _require(Run.objects.filter(id=run_id).exists(), f"unknown run {run_id}")


def check_size(*args) -> None:
    size = len(json.dumps(args, default=str))
    _require(size <= MAX_MESSAGE_CHARS, f"message of {size} characters (limit {MAX_MESSAGE_CHARS})")


def check_artifacts(artifacts) -> None:
    _require(isinstance(artifacts, list) and len(artifacts) <= MAX_ARTIFACTS,
             f"artifacts must be a list of at most {MAX_ARTIFACTS}")
    for i, artifact in enumerate(artifacts):
        _require(isinstance(artifact, dict), f"artifact {i} is not an object")
        _string(artifact.get("kind"), f"artifact {i} kind", 20)
        _string(artifact.get("name"), f"artifact {i} name", 200)
        if "file" in artifact:  # a reference to what the worker stored; services checks it is this run's
            _string(artifact["file"], f"artifact {i} file", 500)
            size = artifact.get("size")
            _require(isinstance(size, int) and not isinstance(size, bool) and size >= 0,
                     f"artifact {i} size {size!r} is not a byte count")
            _require(isinstance(artifact.get("sha256"), str) and bool(_SHA256_RE.match(artifact["sha256"])),
                     f"artifact {i} sha256 is not 64 hex digits")
        elif "error" in artifact:  # the worker could not store it (disk full...): the run says why
            _string(artifact["error"], f"artifact {i} error", 2000)
        else:  # inline: small probe JSON only (an older worker); files never cross the broker
            _string(artifact.get("content"), f"artifact {i} content", MAX_INLINE_CHARS)


def check_measurement(m, i: int) -> None:
    _require(isinstance(m, dict), f"measurement {i} is not an object")
    _string(m.get("metric"), f"measurement {i} metric", 100)
    _number(m.get("value"), f"measurement {i} value")
    _string(m.get("unit", ""), f"measurement {i} unit", 20)
    _require(m.get("direction", Measurement.Direction.NONE) in Measurement.Direction.values,
             f"measurement {i} direction {m.get('direction')!r} is not one of {Measurement.Direction.values}")
    samples = m.get("samples", [])
    _require(isinstance(samples, list) and len(samples) <= MAX_SAMPLES, f"measurement {i} samples is not a list")
    for s in samples:
        _optional_number(s, f"measurement {i} sample")
    _optional_number(m.get("ci_low"), f"measurement {i} ci_low")
    _optional_number(m.get("ci_high"), f"measurement {i} ci_high")
    _require(isinstance(m.get("details", {}), dict), f"measurement {i} details is not an object")


def check_result(result) -> None:
    _require(isinstance(result, dict), "the result is not an object")
    measurements = result.get("measurements", [])
    _require(isinstance(measurements, list) and len(measurements) <= MAX_MEASUREMENTS,
             f"measurements must be a list of at most {MAX_MEASUREMENTS}")
    for i, m in enumerate(measurements):
        check_measurement(m, i)
    check_artifacts(result.get("artifacts", []))
    _require(isinstance(result.get("build") or {}, dict), "build is not an object")
    check_host(result.get("host") or {})


def check_host(host) -> None:
    """runners.hostinfo.host_info(): short strings and a GPU count."""
    _require(isinstance(host, dict), "host is not an object")
    for key in ("hostname", "gpu_model", "driver", "cpu_model"):
        _string(host.get(key, ""), f"host {key}", 200)
    count = host.get("gpu_count", 0)
    _require(isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= 1024,
             f"host gpu_count {count!r} is not a whole number from 0 to 1024")


def check_claim(run_id, task_id, worker_host, attempt=0) -> None:
    check_run(run_id)
    _string(task_id, "task id", 64)
    _string(worker_host, "worker host", 200)
    _require(isinstance(attempt, int) and not isinstance(attempt, bool) and 0 <= attempt <= 1000,
             f"attempt {attempt!r} is not a retry count")


def check_progress(run_id, phase, state=None, task_id="") -> None:
    check_run(run_id)
    _string(phase, "phase", 100)
    _require(state is None or state in Run.ACTIVE_STATES, f"state {state!r} is not one of {Run.ACTIVE_STATES}")
    _string(task_id, "task id", 64)


def check_completion(run_id, result, task_id="") -> None:
    check_size(result)
    check_run(run_id)
    check_result(result)
    _string(task_id, "task id", 64)


def check_failure(run_id, error, artifacts=None, failure_kind="", build=None, task_id="") -> None:
    check_size(error, artifacts, build)
    check_run(run_id)
    _string(error, "error", MAX_ERROR_CHARS)
    check_artifacts(artifacts or [])
    _string(failure_kind, "failure kind", 10)
    _require(build is None or isinstance(build, dict), "build is not an object")
    _string(task_id, "task id", 64)


def checked(check):
    """Run CHECK on a task's arguments first; a bad message is logged and dropped (None)."""
    def decorate(task_function):
        @functools.wraps(task_function)
        def wrapper(*args, **kwargs):
            try:
                check(*args, **kwargs)
            except (BadMessage, TypeError) as exc:  # TypeError: wrong number or names of arguments
                log.warning("dropped a bad %s message: %s", task_function.__name__, str(exc)[:500])
                return None
            return task_function(*args, **kwargs)
        return wrapper
    return decorate
