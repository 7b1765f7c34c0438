"""Listeners of the run life cycle's signals."""
import logging

from django.conf import settings

log = logging.getLogger(__name__)
STATUS_TASK = "hooks.report_commit_status"


def report_status_when_outcome_changes(sender, run_id: int, **kwargs) -> None:
    """Queue the commit status of a run whose outcome changed or that was just judged. Never
    raises: reporting must not fail a run."""
    if not settings.BENCH_GITHUB_TOKEN:
        return
    try:
        from benchsite.bench.models import Run
        from benchsite.celery import app

        from .status import run_status_target

        if run_status_target(Run.objects.select_related("benchmark__engine_source").get(id=run_id)) is None:
            return
        app.send_task(STATUS_TASK, args=[run_id], queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # broker down, run deleted...: log it, the run stays as it is
        log.exception("could not queue the commit status of run %s", run_id)
