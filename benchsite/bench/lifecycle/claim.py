"""A GPU worker claims a queued run."""
import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from ..models import Run
from .signals import run_started

log = logging.getLogger(__name__)


def run_claim(*, run_id: int, task_id: str, worker_host: str, attempt: int = 0) -> bool:
    """Atomically take a QUEUED run for one worker; False if cancelled or already taken.

    ATTEMPT > 0: a retry of the same task after its claim went unanswered (web side or database
    away). That earlier claim may have landed since, leaving the run claimed by a task execution
    that gave up: the retry takes it over while nothing has started. A second delivery of one
    message (same task id, same attempt) still gets False."""
    now = timezone.now()
    claimed = Run.objects.filter(id=run_id, state=Run.State.QUEUED).update(
        state=Run.State.BUILDING,
        task_id=task_id,
        worker_host=worker_host[:200],
        phase="claimed",
        started_at=now,
        heartbeat_at=now,
    )
    if claimed:
        transaction.on_commit(partial(run_started.send, sender=Run, run_id=run_id))
    if claimed or attempt < 1:
        return claimed == 1
    taken = Run.objects.filter(id=run_id, state=Run.State.BUILDING, task_id=task_id, phase="claimed").update(
        worker_host=worker_host[:200], heartbeat_at=now)
    if taken:
        log.warning("run %s: an earlier claim of task %s landed late; its retry %d takes the run", run_id, task_id,
                    attempt)
    return taken == 1
