"""The retention policy's keep rules that change points decide (bench/retention/protected.py):
registered at start by RegressionsConfig.ready."""
from django.db.models import Q

from .models import BisectStep, ChangePoint


def confirmed_regression(ids: set[int]) -> set[int]:
    """Of IDS, the runs of a confirmed regression: after, before, its confirmation, its bisection."""
    confirmed = ChangePoint.objects.filter(is_regression=True).filter(
        Q(status=ChangePoint.Status.CONFIRMED) | Q(confirmation=ChangePoint.Confirmation.AGREED))
    rows = confirmed.filter(Q(run_id__in=ids) | Q(previous_run_id__in=ids) | Q(confirm_run_id__in=ids))
    found = {run for row in rows.values_list("run_id", "previous_run_id", "confirm_run_id") for run in row}
    found |= set(BisectStep.objects.filter(run_id__in=ids, bisection__change_point__in=confirmed)
                 .values_list("run_id", flat=True))
    return found & ids


def change_point(ids: set[int]) -> set[int]:
    """Of IDS, the first run after any change point and the last run before it."""
    rows = ChangePoint.objects.filter(Q(run_id__in=ids) | Q(previous_run_id__in=ids))
    return {run for row in rows.values_list("run_id", "previous_run_id") for run in row} & ids


def register_rules() -> None:
    from benchsite.bench.retention.protected import register

    register("confirmed_regression", confirmed_regression)
    register("change_point", change_point)
