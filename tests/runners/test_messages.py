"""The worker's messages (runners/messages.py): today's wire form, an older worker's forms read
through contract.upgrade, bad input refused naming the field, and the published JSON Schemas."""
import jsonschema
import pytest

from runners import contract
from runners.contract import SCHEMA, ContractError, upgrade
from runners.messages import (MESSAGES, SCHEMA_DIR, Claim, Completion, Heartbeat, JobFailure, Progress,
                              message_schema, schema_files)

SHA = "a" * 40
TODAY = [
    Claim(run_id=7, task_id="exec-1", worker_host="gpu-1"),
    Claim(run_id=7, task_id="exec-1", worker_host="gpu-1", attempt=2),
    Progress(run_id=7, phase="probing decode", state="RUNNING", task_id="exec-1"),
    Progress(run_id=7, phase="starting engine", task_id="exec-1", log_tail="INFO loading"),
    Completion(run_id=7, result=contract.JobResult(measurements=[
        contract.Measurement(metric="decode_tok_s", value=50.0, unit="tok/s", direction="higher")]), task_id="exec-1"),
    JobFailure(run_id=7, error="starting engine: exit 1", artifacts=[{"kind": "server_log", "name": "s", "content": "x"}],
               failure_kind="engine", build={"commit": SHA, "path": "source"}, task_id="exec-1"),
    Heartbeat(worker="gpu@host-a", pools=["cpu", "h200x2"]),
]


def test_the_wire_form_is_the_celery_arguments_every_web_side_reads():
    assert Claim(run_id=7, task_id="t", worker_host="h").task_args() == ([7, "t", "h"], {})
    assert Claim(run_id=7, task_id="t", worker_host="h", attempt=2).task_args() == ([7, "t", "h"], {"attempt": 2})
    assert Progress(run_id=7, phase="storing artifacts").task_args() == ([7, "storing artifacts", None], {})
    assert Progress(run_id=7, phase="p", task_id="t", log_tail="log").task_args() == (
        [7, "p", None], {"task_id": "t", "log_tail": "log"})
    assert JobFailure(run_id=7, error="boom", artifacts=[], failure_kind="worker", build={}).task_args() == (
        [7, "boom", [], "worker"], {})  # an empty build stays off the wire
    assert TODAY[5].task_args()[1] == {"build": {"commit": SHA, "path": "source"}, "task_id": "exec-1"}
    args, kwargs = TODAY[4].task_args()
    assert args[0] == 7 and args[1]["measurements"][0]["metric"] == "decode_tok_s" and kwargs == {"task_id": "exec-1"}
    assert Heartbeat(worker="w", pools=["cpu"]).task_args() == (["w", ["cpu"]], {})


@pytest.mark.parametrize("message", TODAY, ids=lambda m: type(m).__name__)
def test_each_message_reads_back_as_it_was_sent(message):
    args, kwargs = message.task_args()
    again = type(message).from_task(args, kwargs)
    assert again.task_args() == (args, kwargs)
    assert again.model_dump() == message.model_dump()


def test_an_older_workers_forms_are_upgraded():
    claim = Claim.from_task([7, "exec-1", "gpu-1"])  # before `attempt`
    assert (claim.run_id, claim.task_id, claim.worker_host, claim.attempt) == (7, "exec-1", "gpu-1", 0)
    progress = Progress.from_task([7, "probing"])  # no state, no task id, no log tail
    assert (progress.phase, progress.state, progress.task_id, progress.log_tail) == ("probing", None, "", None)
    failure = JobFailure.from_task([7, "boom"])  # no artifacts, kind nor build
    assert (failure.error, failure.artifacts, failure.failure_kind, failure.build) == ("boom", None, "", None)
    # the build sent by position, as workers did before it went by name; a wrong-typed field is read as unset
    failure = JobFailure.from_task([7, "boom", [], "build", {"commit": SHA, "duration_s": "slow"}], {"task_id": "t"})
    assert failure.build == contract.BuildInfo(commit=SHA) and failure.task_id == "t"
    completion = Completion.from_task([7, {"measurements": [{"metric": "decode_tok_s", "value": 5.0}]}])
    assert completion.result.measurements[0].value == 5.0 and completion.result.schema == SCHEMA
    assert upgrade(contract.RECORD_WORKER, ["w"], {"pools": ["cpu"]}) == {"worker": "w", "pools": ["cpu"]}


@pytest.mark.parametrize("message, args, kwargs, reason", [
    (Claim, [7, 42, "host"], {}, "task id 42 is not a string"),
    (Claim, ["7", "t", "host"], {}, "run id '7' is not an integer"),
    (Claim, [True, "t", "host"], {}, "run id True is not an integer"),
    (Claim, [7, "t", "host"], {"attempt": -1}, "attempt -1"),
    (Claim, [7, "t"], {}, "worker host is missing"),
    (Progress, [7, "x" * 101], {}, "phase has 101 characters (limit 100)"),
    (Progress, [7, "probing", "SUCCEEDED"], {}, "state 'SUCCEEDED' is not 'BUILDING' or 'RUNNING'"),
    (Progress, [7, "p", None], {"log_tail": "x" * (64 * 1024 + 1)}, "log tail has 65537 characters"),
    (Progress, [7, "p", None, "t", None, "extra"], {}, "6 arguments, at most 5"),
    (Progress, [7, "p"], {"colour": "red"}, "unknown argument 'colour'"),
    (Progress, [7, "p"], {"phase": "q"}, "argument 'phase' given twice"),
    (JobFailure, [7, {"not": "text"}], {}, "error {'not': 'text'} is not a string"),
    (JobFailure, [7, "boom", [{"kind": "server_log"}]], {}, "artifacts: artifact 0 name is NoneType, not a string"),
    (JobFailure, [7, "boom", [], "engine", ["not", "an", "object"]], {}, "build: build is not an object"),
    (Completion, [7, ["not", "a", "dict"]], {}, "result: the result is not an object"),
    (Completion, [7, {"measurements": [{"metric": "decode_tok_s", "value": "fast"}]}], {},
     "measurement 0 value is 'fast', not a finite number"),
    (Completion, [7], {}, "result is missing"),
    (Heartbeat, ["gpu@b", ["GPU POOL"]], {}, "pools[0] 'GPU POOL'"),
    (Heartbeat, ["gpu@b", []], {}, "pools []"),
    (Heartbeat, ["gpu@b", "cpu"], {}, "pools 'cpu' is not a list"),
    (Heartbeat, [7, ["cpu"]], {}, "worker 7 is not a string"),
])
def test_a_bad_message_is_refused_naming_the_field(message, args, kwargs, reason):
    with pytest.raises(ContractError) as refused:
        message.from_task(args, kwargs)
    assert reason in str(refused.value) and str(refused.value).startswith(message.TASK)


def test_a_result_of_a_newer_schema_is_refused():
    with pytest.raises(ContractError, match=f"schema {SCHEMA + 1}, newer than this checkout's"):
        Completion.from_task([7, {"schema": SCHEMA + 1, "measurements": []}])


def test_the_task_names_and_their_arguments_are_the_models():
    assert {m.TASK for m in MESSAGES} == set(contract.TASK_PARAMETERS)
    for message in MESSAGES:
        assert tuple(message.model_fields) == contract.TASK_PARAMETERS[message.TASK]
        required = [name for name, field in message.model_fields.items() if field.is_required()]
        assert required == list(contract.TASK_PARAMETERS[message.TASK][:len(required)])  # leading ones only


def test_the_published_schemas_are_up_to_date():
    """`python -m runners.messages` writes docs/contract/; run it after changing a message."""
    on_disk = {path.name: path.read_text() for path in SCHEMA_DIR.iterdir()}
    assert on_disk == schema_files(), "docs/contract/ is stale: run `python -m runners.messages`"


@pytest.mark.parametrize("message", TODAY, ids=lambda m: type(m).__name__)
def test_the_schema_accepts_todays_message_and_refuses_a_bad_one(message):
    schema = message_schema(type(message))
    fields = message.model_dump()
    jsonschema.validate(fields, schema)
    first = contract.TASK_PARAMETERS[message.TASK][0]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**fields, first: 3.5 if isinstance(fields[first], str) else "x"}, schema)
