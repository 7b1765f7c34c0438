"""A worker's heartbeats, phases and live log tail, and the check that a message still belongs to
the run's current execution."""
import logging

from django.utils import timezone

from ..models import Run

log = logging.getLogger(__name__)


def run_progress(*, run_id: int, phase: str, state: str | None = None, task_id: str = "",
                 log_tail: str | None = None) -> None:
    """Heartbeat, phase and the log's live tail from the worker; ignored once the run is final,
    or when it comes from an execution that is no longer the run's (`task_id`, sent by current
    workers)."""
    changes = {"phase": phase[:100], "heartbeat_at": timezone.now()}
    if log_tail is not None:
        changes["live_log"] = log_tail
    if state is not None:
        if state not in Run.ACTIVE_STATES:
            raise ValueError(f"a worker cannot move a run to {state}")
        changes["state"] = state
    runs = Run.objects.filter(id=run_id, state__in=Run.ACTIVE_STATES)
    (runs.filter(task_id=task_id) if task_id else runs).update(**changes)


def is_stale_execution(run: Run, task_id: str) -> bool:
    """A message of an execution the run no longer belongs to (re-queued after a lost worker)."""
    if task_id and run.task_id and task_id != run.task_id:
        log.warning("message for run %s from task %s ignored: the run belongs to task %s", run.id, task_id,
                    run.task_id)
        return True
    return False
