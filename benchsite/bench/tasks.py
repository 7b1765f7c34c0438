"""Celery tasks: thin. Web-queue tasks call services; the GPU task calls gpu_worker.

Task names are stable strings: a GPU host may run an older or newer checkout than the web.
"""
from celery import shared_task

from . import gpu_worker


@shared_task(name="bench.execute_run", bind=True, acks_late=True, max_retries=20)
def execute_run(self, run_id: int, spec: dict):
    """GPU queue. Never touches the database: everything goes back as web-queue messages."""
    return gpu_worker.execute(self, run_id, spec)


@shared_task(name="bench.claim_run")
def claim_run(run_id: int, task_id: str, worker_host: str) -> bool:
    from . import services

    return services.run_claim(run_id=run_id, task_id=task_id, worker_host=worker_host)


@shared_task(name="bench.record_progress")
def record_progress(run_id: int, phase: str, state: str | None = None) -> None:
    from . import services

    services.run_progress(run_id=run_id, phase=phase, state=state)


@shared_task(name="bench.record_result")
def record_result(run_id: int, result: dict) -> bool:
    from . import services

    return services.run_complete(run_id=run_id, result=result)


@shared_task(name="bench.record_failure")
def record_failure(run_id: int, error: str, artifacts: list | None = None) -> bool:
    from . import services

    return services.run_fail(run_id=run_id, error=error, artifacts=artifacts)


@shared_task(name="bench.reap_stale_runs")
def reap_stale_runs() -> int:
    from . import services

    return services.runs_reap_stale()
