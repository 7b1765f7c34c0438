"""A run fails: what the worker sent is kept, and where it failed."""
import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from runners.contract import FAILURE_KINDS, BuildInfo

from ..models import Run
from ..storage import artifacts as artifact_store
from .dispatch import pool_release_after
from .judge import judge_finished_run
from .outcome import RunFacts, run_outcome
from .progress import is_stale_execution
from .results import artifacts_discard, artifacts_store, build_record

log = logging.getLogger(__name__)


def run_fail(*, run_id: int, error: str, artifacts: list[dict] | None = None, failure_kind: str = "",
             build: BuildInfo | None = None, task_id: str = "") -> bool:
    """Fail a run that is not final yet, keeping what the worker sent (its log tail above all),
    where it failed (`failure_kind`, one of contract.FAILURE_KINDS) and what it had built."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.is_final or is_stale_execution(run, task_id):
            if run.is_final:
                log.warning("failure for run %s ignored: it is %s (%s)", run_id, run.state, error[:200])
            transaction.on_commit(partial(artifacts_discard, run_id, artifacts))
            return False
        artifacts_store(run, artifacts or [])
        build_record(run, build)
        run.state = Run.State.FAILED
        run.error = error
        run.failure_kind = failure_kind if failure_kind in FAILURE_KINDS else Run.FailureKind.WORKER
        run.finished_at = timezone.now()
        run.outcome, run.outcome_final = run_outcome(RunFacts(state=run.state))
        if run.phase == artifact_store.STORING_PHASE:  # an older worker's, after the job: not where it failed
            run.phase = ""
        run.save(update_fields=["state", "error", "failure_kind", "finished_at", "outcome", "outcome_final", "phase"])
        judge_finished_run(run)
        pool_release_after(run)
    return True
