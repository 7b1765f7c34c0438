"""Queueing runs again: one whose worker was lost, and queued runs whose broker message is gone."""
import logging
from functools import partial
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..models import Run
from . import dispatch
from .dispatch import pool_release_after

log = logging.getLogger(__name__)


def run_requeue(*, run_id: int, reason: str, cutoff) -> bool:
    """Put a run whose worker was lost back in the queue, once (`attempts`); a message from the
    lost execution is ignored afterwards (its task id is no longer the run's)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state not in Run.ACTIVE_STATES or run.attempts > 1 or not run.heartbeat_at or run.heartbeat_at >= cutoff:
            return False
        log.warning("run %s re-queued: %s", run.id, reason)
        Run.objects.filter(id=run.id).update(
            state=Run.State.QUEUED, attempts=run.attempts + 1, task_id="", worker_host="", started_at=None,
            heartbeat_at=None, sent_at=None, phase=f"re-queued: {reason}"[:100], live_log="")
        if run.priority == Run.Priority.FIRST:
            transaction.on_commit(partial(dispatch.enqueue_run, run.id))
        else:  # held again: what came meanwhile may outrank it
            pool_release_after(run)
    return True


def runs_requeue_lost(*, now=None) -> int:
    """Send again the QUEUED runs whose message the broker no longer holds (a Redis restarted
    without its data). The database is the source of truth; the claim is conditional, so a
    message that was in flight after all only costs a skipped duplicate."""
    from benchsite.celery import app

    from ..worker.broker import live_task_ids

    cutoff = (now or timezone.now()) - timedelta(seconds=settings.BENCH_REQUEUE_LOST_AFTER_S)
    queued = Run.objects.filter(state=Run.State.QUEUED)
    # Held runs have no message yet; a sent one is judged from when it was sent.
    waiting = list(queued.filter(Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, priority=Run.Priority.FIRST,
                                                           created_at__lt=cutoff)).select_related("benchmark"))
    live = live_task_ids(app.conf.broker_url, {run.benchmark.queue for run in waiting}) if waiting else set()
    lost = [run for run in waiting if run.task_id not in live] if live is not None else []
    for run in lost:
        log.warning("run %s is QUEUED but its message %s is gone from the broker: sent again", run.id,
                    run.task_id or "(none)")
        if run.priority != Run.Priority.FIRST:  # held again, then sent to the pool's queue in its turn
            queued.filter(id=run.id, task_id=run.task_id).update(task_id="", sent_at=None, host_queue="")
        elif queued.filter(id=run.id, task_id=run.task_id).update(task_id=""):
            dispatch.enqueue_run(run.id)
    pools = set(queued.filter(priority__gt=Run.Priority.FIRST, sent_at__isnull=True)
                .values_list("benchmark__gpu_pool", flat=True))
    for pool in sorted(pools):  # a release lost with a web worker or the broker: the beat makes it up
        dispatch.runs_release(pool=pool)
    return len(lost)
