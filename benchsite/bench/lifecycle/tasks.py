"""Web-side Celery tasks (queue `web`): thin wrappers around the life cycle's verbs; they touch the database.

The GPU side's task lives in gpu_tasks.py, which imports no model. Task names are the contract's
(runners.contract): a GPU host may run an older or newer checkout than the web. A message from a
GPU worker is read once, as its model in runners.messages (messages.py): a bad one is logged and
dropped. While the database is away, a message is retried with backoff (acks_late keeps it in
the broker meanwhile), so results sent by GPU workers land once it returns; Celery's Django
fixup closes the broken connection after each failed attempt, and the reaper does not judge
heartbeats that could not be heard.
"""
from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from runners.contract import CLAIM_RUN, RECORD_FAILURE, RECORD_PROGRESS, RECORD_RESULT, RECORD_WORKER
from runners.messages import Claim, Completion, Heartbeat, JobFailure, Progress

from . import claim, complete, fail, messages, progress, reap, requeue
from ..worker.pools import pool_workers_seen

# Database away (restart, failover, network): retry by the database's policy, 1 s then doubling up
# to 30 s (default), for hours.
DB_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": settings.BENCH_DB_RETRY.base_s,
            "retry_backoff_max": settings.BENCH_DB_RETRY.cap_s,
            "retry_jitter": False, "max_retries": settings.BENCH_DB_RETRY.retries, "acks_late": True}


@shared_task(name=CLAIM_RUN, **DB_RETRY)
@messages.received(Claim)
def claim_run(message: Claim) -> bool:
    return claim.run_claim(run_id=message.run_id, task_id=message.task_id, worker_host=message.worker_host,
                           attempt=message.attempt)


@shared_task(name=RECORD_PROGRESS, **DB_RETRY)
@messages.received(Progress)
def record_progress(message: Progress) -> None:
    progress.run_progress(run_id=message.run_id, phase=message.phase, state=message.state, task_id=message.task_id,
                          log_tail=message.log_tail)


@shared_task(name=RECORD_WORKER)  # not retried: the next beat replaces a lost one
@messages.received(Heartbeat)
def record_worker(message: Heartbeat) -> None:
    pool_workers_seen(worker=message.worker, pools=message.pools)


@shared_task(name=RECORD_RESULT, **DB_RETRY)
@messages.received(Completion, sized=True)
def record_result(message: Completion) -> bool:
    return complete.run_complete(run_id=message.run_id, result=message.result, task_id=message.task_id)


@shared_task(name=RECORD_FAILURE, **DB_RETRY)
@messages.received(JobFailure, sized=True)
def record_failure(message: JobFailure) -> bool:
    return fail.run_fail(run_id=message.run_id, error=message.error, artifacts=message.artifacts,
                         failure_kind=message.failure_kind, build=message.build, task_id=message.task_id)


@shared_task(name="bench.reap_stale_runs")
def reap_stale_runs() -> int:
    return reap.runs_reap_stale(listening_since=reap.reaper_listening_since())


@shared_task(name="bench.requeue_lost_runs")
def requeue_lost_runs() -> int:
    return requeue.runs_requeue_lost()
