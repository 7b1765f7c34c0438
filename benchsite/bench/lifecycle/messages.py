"""Checks of the messages that arrive on the web queue from GPU workers.

Anyone who can write to the broker can send one, and a GPU host may run another checkout: a
message for an unknown run, with wrong types, oversized or of a newer schema is logged and
dropped (never stored half, never retried). Each check raises BadMessage with the reason; a
result is read by the contract itself (runners.contract.JobResult.from_dict).
"""
import functools
import json
import logging

from runners.contract import ContractError, JobResult, artifacts_from_list
from runners.outputs.livelog import MAX_BYTES as MAX_LOG_TAIL_BYTES

from ..models import POOL_VALIDATOR, Run

log = logging.getLogger(__name__)

# Artifacts travel as references (bench/storage/artifacts.py), never as files: a message stays small.
MAX_MESSAGE_CHARS = 2_000_000
MAX_ERROR_CHARS = 200_000


class BadMessage(ValueError):
    """The message cannot be acted on; the text says why."""


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise BadMessage(reason)


def _string(value, name: str, limit: int) -> str:
    _require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    _require(len(value) <= limit, f"{name} has {len(value)} characters (limit {limit})")
    return value


def check_run(run_id) -> None:
    _require(isinstance(run_id, int) and not isinstance(run_id, bool), f"run id {run_id!r} is not an integer")
    _require(Run.objects.filter(id=run_id).exists(), f"unknown run {run_id}")


def check_size(*args) -> None:
    size = len(json.dumps(args, default=str))
    _require(size <= MAX_MESSAGE_CHARS, f"message of {size} characters (limit {MAX_MESSAGE_CHARS})")


def check_artifacts(artifacts) -> None:
    """References to what the worker stored, or small inline content; files never cross."""
    try:
        artifacts_from_list(artifacts, broker=True)
    except ContractError as exc:
        raise BadMessage(str(exc)) from None


def check_result(result) -> JobResult:
    """The result as the contract reads it (its measurements, artifacts, build and host)."""
    try:
        return JobResult.from_dict(result, broker=True)
    except ContractError as exc:
        raise BadMessage(str(exc)) from None


def check_claim(run_id, task_id, worker_host, attempt=0) -> None:
    check_run(run_id)
    _string(task_id, "task id", 64)
    _string(worker_host, "worker host", 200)
    _require(isinstance(attempt, int) and not isinstance(attempt, bool) and 0 <= attempt <= 1000,
             f"attempt {attempt!r} is not a retry count")


def check_progress(run_id, phase, state=None, task_id="", log_tail=None) -> None:
    check_run(run_id)
    _string(phase, "phase", 100)
    _require(state is None or state in Run.ACTIVE_STATES, f"state {state!r} is not one of {Run.ACTIVE_STATES}")
    _string(task_id, "task id", 64)
    if log_tail is not None:  # the build's and engine's last 64 KB (runners.outputs.livelog)
        _string(log_tail, "log tail", MAX_LOG_TAIL_BYTES)


MAX_POOLS = 50


def check_worker(worker, pools) -> None:
    _string(worker, "worker", 200)
    _require(isinstance(pools, list) and 0 < len(pools) <= MAX_POOLS, f"pools must be a list of 1 to {MAX_POOLS}")
    for pool in pools:
        _require(isinstance(pool, str) and POOL_VALIDATOR.regex.match(pool) is not None, f"pool {pool!r} is not a pool name")


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
