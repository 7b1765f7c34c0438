"""The messages a GPU worker sends the web side (runners.contract's tasks), as typed models: the
GPU side builds them, the web side parses each once, on arrival.

    claim = Claim(run_id=7, task_id="c0ffee", worker_host="gpu-1")
    app.send_task(claim.TASK, *claim.task_args())   # args and kwargs, the wire form every web side reads
    Claim.from_task(args, kwargs)                    # contract.upgrade, then the checks; ContractError names the field

The wire stays the Celery arguments an older worker sends (contract.TASK_PARAMETERS): a newer
worker's message is read by an older web side, and the reverse. Each message's JSON Schema is
in docs/contract/ (`python -m runners.messages` writes them; a test fails when they are stale).
The job itself (contract.JobSpec) and its result (contract.JobResult) keep their own readers.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, ValidationError, WithJsonSchema,
                      field_validator)

from runners.contract import (CLAIM_RUN, FAILURE_KINDS, POOL_PATTERN, RECORD_FAILURE, RECORD_PROGRESS, RECORD_RESULT,
                              RECORD_WORKER, TASK_PARAMETERS, BuildInfo, ContractError, JobResult, artifacts_from_list,
                              upgrade)
from runners.outputs.livelog import MAX_BYTES as MAX_LOG_TAIL_CHARS

MAX_ERROR_CHARS = 200_000
MAX_POOLS = 50
WorkerState = Literal["BUILDING", "RUNNING"]  # the states a worker may move its run to (the web side's active ones)
WORKER_STATES = get_args(WorkerState)


class WorkerMessage(BaseModel):
    """A message for the task TASK; a worker sends its first POSITIONAL arguments by position and
    the rest by name, each only when it differs from its default."""
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    TASK: ClassVar[str]
    POSITIONAL: ClassVar[int]

    @classmethod
    def from_task(cls, args=(), kwargs=None):
        """The message from a task's ARGS and KWARGS, as any worker sends them."""
        try:
            return cls.model_validate(upgrade(cls.TASK, args, kwargs or {}))
        except ValidationError as exc:
            raise ContractError(f"{cls.TASK}: " + "; ".join(error_reason(e) for e in exc.errors())) from None

    def task_args(self) -> tuple[list, dict]:
        """(args, kwargs) for `send_task`."""
        names = TASK_PARAMETERS[self.TASK]
        values = self.model_dump()
        defaults = {name: field.default for name, field in type(self).model_fields.items()}
        return ([values[name] for name in names[:self.POSITIONAL]],
                {name: values[name] for name in names[self.POSITIONAL:] if values[name] != defaults[name]})


_EXPECTED = {"int_type": "an integer", "string_type": "a string", "list_type": "a list", "dict_type": "an object",
             "bool_type": "true or false"}


def error_reason(error: dict) -> str:
    """One of pydantic's errors as a sentence that names the field: 'run id '1' is not an integer'."""
    label = "".join(f"[{part}]" if isinstance(part, int) else f" {part}".replace("_", " ") for part in error["loc"])
    label, kind, ctx = label.strip(), error["type"], error.get("ctx") or {}
    value = repr(error.get("input"))[:100]
    if kind in _EXPECTED:
        return f"{label} {value} is not {_EXPECTED[kind]}"
    if kind == "string_too_long":
        return f"{label} has {len(error['input'])} characters (limit {ctx['max_length']})"
    if kind == "missing":
        return f"{label} is missing"
    if kind == "literal_error":
        return f"{label} {value} is not {ctx['expected']}"
    if kind == "value_error":
        return f"{label}: {ctx['error']}"
    return f"{label} {value}: {error['msg'][:1].lower()}{error['msg'][1:]}"


RunId = Annotated[int, Field(description="the run's id on the web side")]
TaskId = Annotated[str, Field(max_length=64, description=(
    "the Celery task id of the execution that sends it ('' from an older worker): the web side ignores "
    "the messages of an execution the run no longer belongs to"))]


def _job_result(value) -> JobResult:
    return value if isinstance(value, JobResult) else JobResult.from_dict(value, broker=True)


def _build(value) -> BuildInfo | None:
    return value if value is None or isinstance(value, BuildInfo) else BuildInfo.from_dict(value) or None


class Claim(WorkerMessage):
    """A worker takes a queued run before it starts it; the web side answers true, or false when
    the run was cancelled or another execution has it."""
    TASK: ClassVar[str] = CLAIM_RUN
    POSITIONAL: ClassVar[int] = 3

    run_id: RunId
    task_id: TaskId
    worker_host: str = Field(max_length=200, description="the worker's host name")
    attempt: int = Field(0, ge=0, le=1000, description=(
        "the task's retry count: a retry may take over the run its earlier, unanswered claim took"))


class Progress(WorkerMessage):
    """A run's phase, sent at each change; every BENCH_HEARTBEAT_INTERVAL_S the same again as a
    heartbeat, with the live log's tail when it grew."""
    TASK: ClassVar[str] = RECORD_PROGRESS
    POSITIONAL: ClassVar[int] = 3

    run_id: RunId
    phase: str = Field(max_length=100, description="what the worker is doing, as the run page shows it")
    state: WorkerState | None = Field(None, description="the run's new state, if it changes")
    task_id: TaskId = ""
    log_tail: str | None = Field(None, max_length=MAX_LOG_TAIL_CHARS, description=(
        "the build's and engine's log so far, its last 64 KB; only when it changed"))


class Completion(WorkerMessage):
    """A run's result: the job's figures, its artifacts as stored references, build and host."""
    TASK: ClassVar[str] = RECORD_RESULT
    POSITIONAL: ClassVar[int] = 2

    run_id: RunId
    result: Annotated[JobResult, PlainValidator(_job_result), PlainSerializer(JobResult.to_dict),
                      WithJsonSchema({"type": "object", "description": (
                          "runners.contract.JobResult: measurements, artifacts, build, engine, host, "
                          "took_effect, phases, notes and schema")})]
    task_id: TaskId = ""


class JobFailure(WorkerMessage):
    """A run failed: why, where (its kind), what it left and what it had built. The phase it
    failed in is the last Progress the run had."""
    TASK: ClassVar[str] = RECORD_FAILURE
    POSITIONAL: ClassVar[int] = 4

    run_id: RunId
    error: str = Field(max_length=MAX_ERROR_CHARS, description="the reason, as the run page shows it")
    artifacts: list[dict[str, Any]] | None = Field(None, description=(
        "the job's files as stored references or small inline content (runners.contract.ArtifactRef)"))
    failure_kind: str = Field("", max_length=10, description=(
        f"where it failed: one of {', '.join(FAILURE_KINDS)}; another (or none) is read as worker"))
    build: Annotated[BuildInfo | None, PlainValidator(_build),
                     PlainSerializer(lambda build: build.to_dict() if build else None),
                     WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "null"}], "description": (
                         "what the worker had built (runners.contract.BuildInfo); a field of the "
                         "wrong type is read as unset")})] = None
    task_id: TaskId = ""

    @field_validator("artifacts")
    @classmethod
    def _artifacts_cross_the_broker(cls, artifacts):
        if artifacts is not None:
            artifacts_from_list(artifacts, broker=True)
        return artifacts


Pool = Annotated[str, Field(pattern=POOL_PATTERN)]


class Heartbeat(WorkerMessage):
    """The pools a GPU worker serves, every BENCH_HEARTBEAT_INTERVAL_S: a pool none of whose
    workers spoke for BENCH_WORKER_SEEN_TIMEOUT_S is not served."""
    TASK: ClassVar[str] = RECORD_WORKER
    POSITIONAL: ClassVar[int] = 2

    worker: str = Field(max_length=200, description="the Celery worker's name (name@host)")
    pools: list[Pool] = Field(min_length=1, max_length=MAX_POOLS, description="the pools of its gpu.<pool> queues")


MESSAGES: tuple[type[WorkerMessage], ...] = (Claim, Progress, Completion, JobFailure, Heartbeat)
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "contract"


def message_schema(message: type[WorkerMessage]) -> dict:
    """MESSAGE's JSON Schema (the keyword arguments' form), with its task and argument order."""
    names = TASK_PARAMETERS[message.TASK]
    return {**message.model_json_schema(), "x-task": message.TASK,
            "x-positional": list(names[:message.POSITIONAL]), "x-keyword": list(names[message.POSITIONAL:])}


def schema_files() -> dict[str, str]:
    """docs/contract/'s files as they should be: one JSON Schema a message, and the page listing them."""
    files = {f"{m.__name__}.schema.json": json.dumps(message_schema(m), indent=2) + "\n" for m in MESSAGES}
    rows = "\n".join(f"| `{m.__name__}` | `{m.TASK}` | {', '.join(f'`{n}`' for n in TASK_PARAMETERS[m.TASK])} "
                     f"| [{m.__name__}.schema.json]({m.__name__}.schema.json) |" for m in MESSAGES)
    files["messages.md"] = (
        "# The worker's messages\n\n"
        "<!-- Generated by `python -m runners.messages` from runners/messages.py: edit there. -->\n\n"
        "What a GPU worker sends the web side over the `web` queue, besides the job's spec it receives "
        "(`bench.execute_run`). Each message is a typed model in `runners/messages.py`; its wire form is the "
        "Celery task's arguments, in this order (the first ones by position, the rest by name; an older "
        "worker leaves out trailing ones). The web side reads each once on arrival "
        "(`benchsite/bench/lifecycle/messages.py`) and drops a bad one, naming the field.\n\n"
        "| message | task | arguments | JSON Schema |\n|---|---|---|---|\n" + rows + "\n")
    return files


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_files().items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_schemas(Path(sys.argv[1]) if len(sys.argv) > 1 else SCHEMA_DIR):
        print(written_path)
