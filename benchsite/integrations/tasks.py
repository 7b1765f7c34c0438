"""Web-queue task: thin; the status logic is each forge's (github/statuses.py). Stable name for
older/newer workers."""
from celery import shared_task
from django.conf import settings

from benchsite.retry import retry_or_give_up


@shared_task(name="hooks.report_commit_status", bind=True, acks_late=True, max_retries=None)
def report_commit_status(self, run_id: int) -> bool:
    from .forge_api import TransientStatusError
    from .forges import FORGES

    try:
        return any(forge.run_status_report(run_id) for forge in FORGES.values())
    except TransientStatusError as exc:
        return retry_or_give_up(self, exc, what=f"commit status of run {run_id}",
                                policy=settings.BENCH_STATUS_RETRY)
