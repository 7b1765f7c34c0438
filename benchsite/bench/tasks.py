"""Web-side Celery tasks (queue `web`): thin wrappers around services; they touch the database.

The GPU side's task lives in gpu_tasks.py, which imports no model. Task names are stable strings:
a GPU host may run an older or newer checkout than the web.
"""
from celery import shared_task

from . import services


@shared_task(name="bench.claim_run")
def claim_run(run_id: int, task_id: str, worker_host: str) -> bool:
    return services.run_claim(run_id=run_id, task_id=task_id, worker_host=worker_host)


@shared_task(name="bench.record_progress")
def record_progress(run_id: int, phase: str, state: str | None = None) -> None:
    services.run_progress(run_id=run_id, phase=phase, state=state)


@shared_task(name="bench.record_result")
def record_result(run_id: int, result: dict) -> bool:
    return services.run_complete(run_id=run_id, result=result)


@shared_task(name="bench.record_failure")
def record_failure(run_id: int, error: str, artifacts: list | None = None, failure_kind: str = "",
                   build: dict | None = None) -> bool:
    return services.run_fail(run_id=run_id, error=error, artifacts=artifacts, failure_kind=failure_kind, build=build)


@shared_task(name="bench.reap_stale_runs")
def reap_stale_runs() -> int:
    return services.runs_reap_stale()
