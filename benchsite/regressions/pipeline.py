"""What happens to a finished run: a bisection step moves its bisection on, a canary run feeds
its canary's series; any other run gets verdicts, change points of its series, a confirmation
re-run (one per variant and commit, whatever the number of metrics it moved), alerts, and one
bisection per commit range once its regressions are confirmed."""
from functools import partial

from django.db import transaction

from benchsite.bench.domain.branches import on_main_line
from benchsite.bench.models import Run
from runners import contract

from .bisection import bisect_steps_record, bisection_for_change
from .changepoints import changepoints_detect
from .confirm import (changepoint_confirm, changepoint_from_verdict, changepoint_incorrect_output,
                      confirmations_resolve)
from .canary import canary_record
from .models import BisectStep, CanaryRun, ChangePoint, Verdict
from .noise import noise_refresh
from .signals import change_point_changed
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


def _judge_and_confirm(run: Run, is_confirmation: bool) -> list[ChangePoint]:
    """Verdicts, detection and confirmation; returns the change points settled now: confirmed,
    or their confirmation disagreed (either may complete a commit range's bisection)."""
    settled = confirmations_resolve(run=run) if is_confirmation else []
    if run.state != Run.State.SUCCEEDED:
        return settled
    verdicts = verdicts_compute(run=run)
    if not on_main_line(run):  # judged against the main line; its change points are the main line's own
        return settled
    for change_point in _new_change_points(run, verdicts, is_confirmation) + changepoints_detect(run=run):
        if change_point.is_regression:
            changepoint_confirm(change_point=change_point)
            if change_point.status == ChangePoint.Status.CONFIRMED or change_point.confirmation in (
                    ChangePoint.Confirmation.AGREED, ChangePoint.Confirmation.DISAGREED):
                settled.append(change_point)
        else:  # an improvement may bring back the level of an earlier regression
            change_point_changed.send(sender=ChangePoint, change_point=change_point)
    noise_refresh(run=run)  # after judging: a run's own figure never sets the bound it is judged by
    return settled


def run_judge(*, run_id: int) -> None:
    run = Run.objects.select_related("benchmark__engine_source", "variant").get(id=run_id)
    if run.trigger == Run.Trigger.PULL:  # judged against its own base, with the other side (pulls)
        return
    if BisectStep.objects.filter(run=run).exists():
        bisect_steps_record(run=run)
        return
    if CanaryRun.objects.filter(run=run).exists():
        if run.state == Run.State.SUCCEEDED:
            canary_record(run=run)
        return
    is_confirmation = ChangePoint.objects.filter(confirm_run=run).exists()
    for change_point in _judge_and_confirm(run, is_confirmation):
        # after the commit: the bisection fetches the repository, never while holding the write lock
        transaction.on_commit(partial(bisection_for_change, change_point=change_point))
