"""What happens to a finished run: verdicts, change points of its series, confirmation, alerts."""
from benchsite.bench.models import Run
from runners import contract

from .changepoints import changepoints_detect
from .confirm import (changepoint_confirm, changepoint_from_verdict, changepoint_incorrect_output,
                      confirmations_resolve)
from .models import ChangePoint, Verdict
from .verdicts import verdicts_compute


def _new_change_points(run: Run, verdicts: list[Verdict], is_confirmation: bool) -> list[ChangePoint]:
    new = []
    for verdict in verdicts:
        if verdict.kind != Verdict.Kind.REGRESSION:
            continue
        if verdict.metric == contract.CORRECT:
            new.append(changepoint_incorrect_output(run=run))
        elif not is_confirmation:
            new.append(changepoint_from_verdict(run=run, verdict=verdict))
    return [cp for cp in new if cp is not None]


def run_judge(*, run_id: int) -> None:
    run = Run.objects.select_related("benchmark__engine_source", "variant").get(id=run_id)
    is_confirmation = ChangePoint.objects.filter(confirm_run=run).exists()
    if is_confirmation:
        confirmations_resolve(run=run)
    if run.state != Run.State.SUCCEEDED:
        return
    verdicts = verdicts_compute(run=run)
    created = _new_change_points(run, verdicts, is_confirmation)
    created += changepoints_detect(run=run)
    for change_point in created:
        if change_point.is_regression:
            changepoint_confirm(change_point=change_point)
