"""Listeners of the run life cycle's signals."""
import logging

from django.conf import settings

log = logging.getLogger(__name__)
STATUS_TASK = "hooks.report_commit_status"


def report_status_when_outcome_changes(sender, run_id: int, **kwargs) -> None:
    """Queue the commit status of a run whose outcome changed or that was just judged, where a
    forge wants one (GitHub, with a token). Never raises: reporting must not fail a run."""
    try:
        from .forges import FORGES

        if not any(forge.run_status_wanted(run_id) for forge in FORGES.values()):
            return
        from benchsite.celery import app

        app.send_task(STATUS_TASK, args=[run_id], queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # broker down, run deleted...: log it, the run stays as it is
        log.exception("could not queue the commit status of run %s", run_id)
