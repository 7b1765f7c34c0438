"""The GPU-side Celery task (queue `gpu.<pool>`). It imports no model and opens no database
connection (import-linter checks it): a GPU host needs only the broker URL."""
from celery import shared_task

from runners.contract import EXECUTE_RUN

from . import gpu_worker


@shared_task(name=EXECUTE_RUN, bind=True, acks_late=True, max_retries=20)
def execute_run(self, run_id: int, spec: dict, batch: str = ""):
    return gpu_worker.execute(self, run_id, spec, batch)
