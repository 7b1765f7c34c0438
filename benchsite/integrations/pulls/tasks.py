"""Web-queue task that reports a comparison back to its forge: thin, the logic is in `report`.
Stable name for older/newer workers."""
import logging

from celery import shared_task
from django.conf import settings

from benchsite.retry import retry_or_give_up

log = logging.getLogger(__name__)
REPORT_TASK = "hooks.report_pull"


@shared_task(name=REPORT_TASK, bind=True, acks_late=True, max_retries=None)
def report_pull(self, comparison_id: int) -> bool:
    from . import report
    from .models import Comparison

    try:
        return report.comparison_report(comparison_id=comparison_id)
    except Comparison.DoesNotExist:
        log.info("comparison %s is gone: nothing to report", comparison_id)
        return False
    except report.TransientReportError as exc:
        return retry_or_give_up(self, exc, what=f"report of comparison {comparison_id}",
                                policy=settings.BENCH_STATUS_RETRY)


def queue_report(comparison_id: int) -> None:
    """Queue the report of a comparison whose state changed. Never raises."""
    try:
        from benchsite.celery import app

        app.send_task(REPORT_TASK, args=[comparison_id], queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # broker away: the next change reports again
        log.exception("could not queue the report of comparison %s", comparison_id)
