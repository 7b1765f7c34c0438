"""Each finished run is judged once (verdicts, change points, confirmation: pipeline.run_judge)
and says so (`Run.judged_at`), or says why not (`Run.judgement_missing`).

The judging runs in one transaction: a database busy or away leaves nothing half-done (no second
confirmation run) and is retried by a task on the web queue; any other failure is recorded on
the run, whose page shows it."""
import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from benchsite.bench.models import Run

log = logging.getLogger(__name__)

RETRIED_ERRORS = (OperationalError, InterfaceError)
JUDGE_TASK = "regressions.judge_run"
VERDICTS = "verdicts: "  # the line of Run.judgement_missing this app owns


def _missing_without_verdicts(missing: str) -> list[str]:
    return [line for line in missing.splitlines() if not line.startswith(VERDICTS)]


def run_judge_once(*, run_id: int) -> bool:
    """Judge a finished run that was not judged yet, then the outcomes it decided; True when
    judged now."""
    from .outcomes import refreshed_after_judging
    from .pipeline import run_judge

    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.judged_at is not None or not run.is_final:
            return False
        # a savepoint: a failed judging leaves the outcomes' refresh a usable transaction
        with refreshed_after_judging(run_id), transaction.atomic():
            run_judge(run_id=run_id)
        Run.objects.filter(id=run_id).update(
            judged_at=timezone.now(), judgement_missing="\n".join(_missing_without_verdicts(run.judgement_missing)))
    return True


def run_judge_recorded(*, run_id: int) -> bool:
    """run_judge_once; a failure other than the database's is logged and recorded on the run."""
    try:
        return run_judge_once(run_id=run_id)
    except RETRIED_ERRORS:
        raise
    except Exception as exc:  # a bug: the run stays as it is, and its page says why it has no verdicts
        log.exception("could not judge run %s", run_id)
        missing = Run.objects.filter(id=run_id).values_list("judgement_missing", flat=True).first() or ""
        line = f"{VERDICTS}judging failed: {type(exc).__name__}: {exc}"[:2000]
        Run.objects.filter(id=run_id).update(judgement_missing="\n".join([*_missing_without_verdicts(missing), line]))
        from .outcomes import outcomes_refresh

        outcomes_refresh(run_ids=[run_id], announce=[run_id])  # the outcome of what the run has
        return False


def judge_or_defer(*, run_id: int) -> None:
    """Judge now; with the database busy or away, leave it to the retried task JUDGE_TASK.
    Never raises: a verdict must not fail the run it judges."""
    try:
        run_judge_recorded(run_id=run_id)
    except RETRIED_ERRORS as exc:
        log.warning("run %s: judging deferred to %s (%s)", run_id, JUDGE_TASK, exc)
        try:
            from benchsite.celery import app

            app.send_task(JUDGE_TASK, args=[run_id], queue=settings.BENCH_WEB_QUEUE)
        except Exception:  # broker away as well: the page says the verdicts are pending; bench_judge
            log.exception("run %s: could not queue its judgement", run_id)
    except Exception:  # recording the failure failed too
        log.exception("could not judge run %s", run_id)
