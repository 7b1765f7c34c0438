"""The messages that arrive on the web queue from GPU workers, each read once on arrival.

Anyone who can write to the broker can send one, and a GPU host may run another checkout: a
message is read by its model (runners.messages, through contract.upgrade for an older worker's
form); one for an unknown run, with wrong types, oversized or of a newer schema is logged and
dropped (never stored half, never retried), with the reason that names the field.
"""
import functools
import json
import logging

from runners.contract import ContractError

from ..models import Run

log = logging.getLogger(__name__)

# Artifacts travel as references (bench/storage/artifacts.py), never as files: a message stays small.
MAX_MESSAGE_CHARS = 2_000_000


class BadMessage(ValueError):
    """The message cannot be acted on; the text says why."""


def check_run(run_id: int) -> None:
    if not Run.objects.filter(id=run_id).exists():
        raise BadMessage(f"unknown run {run_id}")


def check_size(*parts) -> None:
    size = len(json.dumps(parts, default=str))
    if size > MAX_MESSAGE_CHARS:
        raise BadMessage(f"message of {size} characters (limit {MAX_MESSAGE_CHARS})")


def received(message_type, *, sized: bool = False):
    """The task's arguments read as MESSAGE_TYPE (a runners.messages model), its run known,
    and its size checked first when SIZED; the task function gets the message. A bad one is
    logged and dropped (None)."""
    def decorate(task_function):
        @functools.wraps(task_function)
        def wrapper(*args, **kwargs):
            try:
                if sized:
                    check_size(args, kwargs)
                message = message_type.from_task(args, kwargs)
                if "run_id" in type(message).model_fields:
                    check_run(message.run_id)
            except (BadMessage, ContractError) as exc:
                log.warning("dropped a bad %s message: %s", task_function.__name__, str(exc)[:500])
                return None
            return task_function(message)
        return wrapper
    return decorate
