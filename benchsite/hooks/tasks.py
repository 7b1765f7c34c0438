"""Web-queue task: thin; the status logic is in `status`. Stable name for older/newer workers."""
import logging

from celery import shared_task
from django.conf import settings

log = logging.getLogger(__name__)


@shared_task(name="hooks.report_commit_status", bind=True, acks_late=True, max_retries=None)
def report_commit_status(self, run_id: int) -> bool:
    from . import status

    try:
        return status.commit_status_report(run_id=run_id)
    except status.TransientStatusError as exc:
        attempt = self.request.retries
        if attempt >= settings.BENCH_STATUS_MAX_RETRIES:
            log.error("commit status of run %s not reported after %d attempts: %s", run_id, attempt + 1, exc)
            return False
        countdown = settings.BENCH_STATUS_RETRY_BASE_MS / 1000 * 2**attempt
        log.warning("commit status of run %s: %s; retry %d in %.1f s", run_id, exc, attempt + 1, countdown)
        raise self.retry(countdown=countdown) from None
