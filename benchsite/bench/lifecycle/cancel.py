"""Cancelling a run that has not finished."""
from functools import partial

from django.db import transaction
from django.utils import timezone

from ..models import Run
from ..domain import home_cache
from .dispatch import pool_release_after
from .outcome import RunFacts, run_outcome
from .signals import outcome_changed


def run_cancel(*, run: Run) -> bool:
    """Cancel a run that has not finished; a running one has its task terminated."""
    from benchsite.celery import app

    outcome, final = run_outcome(RunFacts(state=Run.State.CANCELLED))
    updated = Run.objects.filter(id=run.id, state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES]).update(
        state=Run.State.CANCELLED, finished_at=timezone.now(), phase="cancelled", outcome=outcome, outcome_final=final
    )
    if updated:
        home_cache.note_change(run.benchmark_id)  # an update sends no signal: the home page's version
        transaction.on_commit(partial(outcome_changed.send, sender=Run, run_id=run.id))
    if updated and run.task_id and run.state in Run.ACTIVE_STATES:
        # SIGTERM ends the task's process; the engine, in its own process group, dies with it
        # (runners.engine sets the parent-death signal).
        app.control.revoke(run.task_id, terminate=True, signal="SIGTERM")
    run.refresh_from_db()
    if updated:
        pool_release_after(run)
    return bool(updated)
