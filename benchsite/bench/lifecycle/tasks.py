"""Web-side Celery tasks (queue `web`): thin wrappers around the life cycle's verbs; they touch the database.

The GPU side's task lives in gpu_tasks.py, which imports no model. Task names are stable strings:
a GPU host may run an older or newer checkout than the web. Messages from GPU workers are
checked first (messages.py): a bad one is logged and dropped. While the database is away, a
message is retried with backoff (acks_late keeps it in the broker meanwhile), so results sent
by GPU workers land once it returns; Celery's Django fixup closes the broken connection after
each failed attempt, and the reaper does not judge heartbeats that could not be heard.
"""
from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from . import claim, complete, fail, messages, progress, reap, requeue
from ..worker.pools import pool_workers_seen

# Database away (restart, failover, network): retry, 1 s then doubling up to 30 s (default), for hours.
DB_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": 1,
            "retry_backoff_max": settings.BENCH_DB_RETRY_BACKOFF_MAX_S,
            "retry_jitter": False, "max_retries": 500, "acks_late": True}


@shared_task(name="bench.claim_run", **DB_RETRY)
@messages.checked(messages.check_claim)
def claim_run(run_id: int, task_id: str, worker_host: str, attempt: int = 0) -> bool:
    return claim.run_claim(run_id=run_id, task_id=task_id, worker_host=worker_host, attempt=attempt)


@shared_task(name="bench.record_progress", **DB_RETRY)
@messages.checked(messages.check_progress)
def record_progress(run_id: int, phase: str, state: str | None = None, task_id: str = "",
                    log_tail: str | None = None) -> None:
    progress.run_progress(run_id=run_id, phase=phase, state=state, task_id=task_id, log_tail=log_tail)


@shared_task(name="bench.record_worker")  # not retried: the next beat replaces a lost one
@messages.checked(messages.check_worker)
def record_worker(worker: str, pools: list) -> None:
    pool_workers_seen(worker=worker, pools=pools)


@shared_task(name="bench.record_result", **DB_RETRY)
@messages.checked(messages.check_completion)
def record_result(run_id: int, result: dict, task_id: str = "") -> bool:
    return complete.run_complete(run_id=run_id, result=result, task_id=task_id)


@shared_task(name="bench.record_failure", **DB_RETRY)
@messages.checked(messages.check_failure)
def record_failure(run_id: int, error: str, artifacts: list | None = None, failure_kind: str = "",
                   build: dict | None = None, task_id: str = "") -> bool:
    return fail.run_fail(run_id=run_id, error=error, artifacts=artifacts, failure_kind=failure_kind, build=build,
                             task_id=task_id)


@shared_task(name="bench.reap_stale_runs")
def reap_stale_runs() -> int:
    return reap.runs_reap_stale(listening_since=reap.reaper_listening_since())


@shared_task(name="bench.requeue_lost_runs")
def requeue_lost_runs() -> int:
    return requeue.runs_requeue_lost()
