"""Web-queue task that brings a forge issue in line with its change point: thin, the logic is in
`sync`; retried like the pull-request reports. Stable name for older/newer workers."""
import logging

from celery import shared_task
from django.conf import settings

from benchsite.retry import retry_or_give_up

from .receivers import SYNC_TASK

log = logging.getLogger(__name__)


@shared_task(name=SYNC_TASK, bind=True, acks_late=True, max_retries=None)
def sync_issue(self, issue_id: int) -> bool:
    from ..forge_api import TransientReportError
    from .models import ForgeIssue
    from .sync import issue_sync

    try:
        return issue_sync(issue_id=issue_id)
    except ForgeIssue.DoesNotExist:
        log.info("forge issue %s is gone: nothing to send", issue_id)
        return False
    except TransientReportError as exc:
        return retry_or_give_up(self, exc, what=f"forge issue {issue_id}",
                                policy=settings.BENCH_STATUS_RETRY)
