"""Post-run judgement, behind one entry point: `judge_finished_run`, called by the life cycle once
a run is final (complete.py, fail.py) or when a finished run's verdicts are still missing.

1. The comparisons of a succeeded run (checks.py: correctness against the reference, the
   communication A/B), in the caller's transaction.
2. Once that commits, the verdicts: `run_finished` goes out, and the regressions app (change
   points, confirmation, alerts, outcomes) and any other listener judge the run."""
import logging
from functools import partial

from django.db import InterfaceError, OperationalError, transaction

from runners.contract import CORRECT, GREEDY_ARTIFACT

from ..models import Run
from .checks import correctness_judge, runs_compare_comm_ab
from .signals import run_finished

log = logging.getLogger(__name__)


def judge_finished_run(run: Run, *, compare: bool = True) -> None:
    """Judge a run that is final: its comparisons now when it succeeded (COMPARE false: they were
    made with its result already), its verdicts once the caller's transaction commits."""
    if compare and run.state == Run.State.SUCCEEDED:
        _judge_results(run)
    transaction.on_commit(partial(run_finished.send, sender=Run, run_id=run.id))


# A database busy or away: the caller's task retries the whole message (tasks.DB_RETRY).
RETRIED_ERRORS = (OperationalError, InterfaceError)


def _judge_results(run: Run) -> None:
    """Correctness against the reference and the communication A/B, in the caller's transaction:
    a retried result finds its run either untouched or judged. A database error propagates (the
    message is retried); any other failure is kept on the run as the judgement it lacks."""
    missing = []
    for what, judge in (("correctness", correctness_judge), ("communication A/B", runs_compare_comm_ab)):
        try:
            with transaction.atomic():  # a savepoint: a failed judge leaves nothing half-written
                judge(run=run)
        except RETRIED_ERRORS:
            raise
        except Exception as exc:  # a bug or an unreadable file: the run's own results still land
            log.exception("run %s: %s not judged", run.id, what)
            missing.append(f"{what}: {exc}")
    if not any(m.startswith("correctness") for m in missing) and not run.measurements.filter(metric=CORRECT).exists():
        greedy = run.artifacts.filter(name=GREEDY_ARTIFACT).first()
        why = greedy.error if greedy and greedy.error else "no greedy output was stored for this run"
        missing.append(f"correctness: {why}")
    if missing:
        run.judgement_missing = "\n".join(missing)
        run.save(update_fields=["judgement_missing"])
