"""Sending runs to the GPU queues: the job spec a worker gets, the send itself, and the release of
held runs (confirmations, bisections, canaries) when their pool has nothing that outranks them."""
import logging
import uuid
from functools import partial

from django.db import transaction
from django.utils import timezone

from runners.contract import EXECUTE_RUN

from ..models import Run
from . import jobspec

log = logging.getLogger(__name__)


def run_spec(run: Run) -> dict:
    """The plain-JSON job a GPU worker executes (runners.contract.JobSpec): the one the run was
    triggered with, filled in (jobspec.py, contract.spec_sent: not validated again), or for a run
    from before specs were kept, rebuilt."""
    return jobspec.run_spec(run)


def enqueue_run(run_id: int, queue: str = "") -> None:
    """Send the run to its benchmark's pool queue, or to QUEUE (one host's queue of that pool,
    runners.hostinfo.host_queue), under the task id already given to it if any (runs_release).
    Every send of a run (the first, the reaper's, a lost message's, a release) carries the spec
    it was triggered with; a run queued before specs were kept keeps the one of its first send."""
    from benchsite.celery import app

    run = Run.objects.select_related("benchmark__engine_source", "variant", "kept_spec").get(id=run_id)
    jobspec.run_spec_keep(run)
    limit = run.benchmark.time_limit_s
    result = app.send_task(
        EXECUTE_RUN,
        args=[run.id, run_spec(run)],
        kwargs={"batch": str(run.batch)},  # the worker's comm health check runs once per batch
        queue=queue or run.benchmark.queue,
        task_id=run.task_id or None,
        soft_time_limit=limit,
        time_limit=limit + 120,  # the soft limit stops the engine cleanly first
    )
    Run.objects.filter(id=run.id, task_id="").update(task_id=result.id)
    Run.objects.filter(id=run.id, state=Run.State.QUEUED).update(sent_at=timezone.now())


def _pool_runs(pool: str):
    return Run.objects.filter(benchmark__gpu_pool=pool)


def _pool_busy(pool: str) -> str:
    """Why the pool's held runs must wait ('' when they need not): a push, form or API run not
    finished yet (queued or running), or a held run already sent and not finished (one at a
    time, so a push that arrives meanwhile waits for that one run at most)."""
    unfinished = _pool_runs(pool).filter(state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES])
    if unfinished.filter(priority=Run.Priority.FIRST).exists():
        return "a push, form or API run of the pool is not finished"
    if unfinished.filter(priority__gt=Run.Priority.FIRST, sent_at__isnull=False).exists():
        return "a confirmation, bisection or canary run of the pool is under way"
    return ""


def runs_release(*, pool: str) -> int | None:
    """Send the pool's next held run (confirmations before bisections and canaries, oldest first)
    when nothing outranks it; returns its id, or None. Called when such a run is queued, when a
    run of the pool finishes or is cancelled, and by the beat (runs_requeue_lost)."""
    with transaction.atomic():
        # Locked, so two web workers releasing at once send one run, not two (PostgreSQL).
        held = (_pool_runs(pool).select_for_update(of=("self",))
                .filter(state=Run.State.QUEUED, priority__gt=Run.Priority.FIRST, sent_at__isnull=True)
                .order_by("priority", "created_at", "id").first())
        if held is None or _pool_busy(pool):
            return None
        Run.objects.filter(id=held.id).update(task_id=str(uuid.uuid4()), sent_at=timezone.now(), phase="")
        transaction.on_commit(partial(_send_released, held.id, held.host_queue))
    return held.id


def _send_released(run_id: int, queue: str) -> None:
    try:
        enqueue_run(run_id, queue)
    except Exception:  # broker down: held again, and the next release (the beat's at the latest) retries
        log.exception("run %s could not be sent; it is held again", run_id)
        Run.objects.filter(id=run_id, state=Run.State.QUEUED).update(task_id="", sent_at=None)


def pool_release_after(run: Run) -> None:
    """A run of the pool is final: the held ones may go (after the run_finished listeners, which
    may have queued a confirmation that outranks a held bisection)."""
    transaction.on_commit(partial(runs_release, pool=run.benchmark.gpu_pool))
