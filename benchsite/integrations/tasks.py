"""Web-queue task: thin; the status logic is in `status`. Stable name for older/newer workers."""
from celery import shared_task
from django.conf import settings

from benchsite.retry import retry_or_give_up


@shared_task(name="hooks.report_commit_status", bind=True, acks_late=True, max_retries=None)
def report_commit_status(self, run_id: int) -> bool:
    from . import status

    try:
        return status.commit_status_report(run_id=run_id)
    except status.TransientStatusError as exc:
        return retry_or_give_up(self, exc, what=f"commit status of run {run_id}",
                                max_retries=settings.BENCH_STATUS_MAX_RETRIES, base_ms=settings.BENCH_STATUS_RETRY_BASE_MS)
