"""Confirm before alerting: a regression's commit is run once more, and the alert goes out only
if that run lands on the regressed side. A false-alarm rate p becomes about p squared. While the
re-runs cannot tell (judging.confirmation_look), one more, up to BENCH_CONFIRM_MAX_RUNS. One re-run
per variant and commit: it measures every metric, so every change of that variant there shares it."""
from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchsite.bench.domain.branches import main_line_q
from benchsite.bench.models import EngineSource, Measurement, Run
from benchsite.bench.lifecycle.trigger import runs_trigger, TriggerError
from runners import contract
from runners.hostinfo import host_queue

from .alerts import alerts_queue
from .detect import judging
from .models import ChangePoint, Verdict
from .samples import run_figure
from .signals import change_point_changed
from .series import Point, parent_commit, point_measurements, same_machine, series_key, series_points
from .noise import series_noise
from .verdicts import unaccepted_change_runs

log = logging.getLogger(__name__)


def _confirm_directly(cp: ChangePoint) -> None:
    cp.status = ChangePoint.Status.CONFIRMED
    cp.save(update_fields=["status", "confirmation", "confirm_run", "updated_at"])
    alerts_queue(change_point=cp)
    change_point_changed.send(sender=ChangePoint, change_point=cp)


def confirm_host(run: Run, *, now=None) -> str:
    """Another worker host of `run`'s pool with the same host fingerprint, seen finishing a run
    in the last settings.BENCH_CONFIRM_HOST_SEEN_H hours (the most recent such); '' when there is none,
    or when the fingerprint is unknown (an older worker: another host is another series)."""
    if not run.host_fingerprint or not run.worker_host:
        return ""
    since = (now or timezone.now()) - timedelta(hours=settings.BENCH_CONFIRM_HOST_SEEN_H)
    return (Run.objects.filter(benchmark__gpu_pool=run.benchmark.gpu_pool, host_fingerprint=run.host_fingerprint,
                               state=Run.State.SUCCEEDED, finished_at__gte=since)
            .exclude(worker_host__in=["", run.worker_host]).order_by("-finished_at", "-id")
            .values_list("worker_host", flat=True).first()) or ""


def _shared_confirmation(cp: ChangePoint) -> Run | None:
    """The confirmation run of another change of the same series at the same commit (at the same
    run for the installed engine) that CP can share: every run measures every metric, so one
    re-run per variant confirms all it changed. One still to finish, or, for a change never
    confirmed yet, one that finished (CP is then judged at once)."""
    same = ChangePoint.objects.filter(series_key=cp.series_key, confirm_run__isnull=False).exclude(pk=cp.pk)
    same = same.filter(commit=cp.commit) if cp.commit else same.filter(run_id=cp.run_id)
    runs = (Run.objects.filter(id__in=same.values("confirm_run"), created_at__gt=cp.run.created_at)
            .exclude(state=Run.State.CANCELLED).order_by("-created_at", "-id"))
    waiting = runs.exclude(state__in=Run.FINAL_STATES).first()
    if waiting is not None or cp.confirm_attempts:  # a second look needs a run it has not seen
        return waiting
    return runs.filter(state=Run.State.SUCCEEDED).first()  # a failed one measured nothing


def changepoint_confirm(*, change_point: ChangePoint) -> None:
    """Queue the confirmation run of a new regression, or share the one another change of the same
    variant and commit has (judged at once when it already finished); alert at once when
    confirmation is off or impossible. A wrong output needs no second run: greedy output is
    deterministic."""
    cp = change_point
    if not cp.is_regression or cp.status != ChangePoint.Status.OPEN or cp.confirmation:
        return
    if cp.metric == contract.CORRECT or not settings.BENCH_CONFIRM_REGRESSIONS:
        return _confirm_directly(cp)
    shared = _shared_confirmation(cp)
    if shared is not None:
        cp.confirmation, cp.confirm_run, cp.confirm_figures = ChangePoint.Confirmation.PENDING, shared, []
        cp.confirm_attempts += 1
        cp.save(update_fields=["confirmation", "confirm_run", "confirm_figures", "confirm_attempts", "updated_at"])
        if shared.is_final:
            _settle(cp, shared)
        return
    try:
        rerun = _rerun(cp)
    except TriggerError as exc:
        log.warning("change point %s: no confirmation run (%s); alerting without one", cp.id, exc)
        return _confirm_directly(cp)
    cp.confirmation, cp.confirm_run, cp.confirm_figures = ChangePoint.Confirmation.PENDING, rerun, []
    cp.confirm_attempts += 1
    cp.save(update_fields=["confirmation", "confirm_run", "confirm_figures", "confirm_attempts", "updated_at"])


def _rerun(cp: ChangePoint) -> Run:
    """Queue one re-run of the change's commit, with the settings of the run that showed it."""
    source = cp.benchmark.engine_source
    at_commit = source is not None and source.kind == EngineSource.Kind.GIT and contract.is_full_sha(cp.commit)
    # On another host of the pool when there is one (its own queue): a host's own fault is not
    # confirmed by the same host. Left waiting there BENCH_REQUEUE_LOST_AFTER_S, it is re-sent to
    # the pool (the reaper's lost-message check reads the pool queue), so a dead host delays it only.
    other = confirm_host(cp.run)
    # No 'confirm' trigger kind exists in bench: ChangePoint.confirm_run records why it ran.
    (rerun,) = runs_trigger(benchmark=cp.benchmark, trigger=Run.Trigger.SCHEDULE, variants=[cp.variant],
                            commit=cp.commit if at_commit else "", ref=cp.commit if at_commit else "",
                            queue=host_queue(cp.benchmark.queue, other) if other else "",
                            repeats=cp.run.repeats,  # as the run that showed the change
                            priority=Run.Priority.CONFIRM,  # after pushes, before bisections
                            branch=cp.run.branch,  # its history: the same line
                            like=cp.run)  # the settings it ran with, whatever bench_apply changed since
    return rerun


def _noise_before(cp: ChangePoint) -> float | None:
    """The series' run-to-run noise at the level before the change: the one the rule knows
    (noise.series_noise, known from at least sensitivity.MIN_STARTS starts), else the robust estimate
    over the runs before the change (judging.robust_noise)."""
    if cp.previous_run is None:
        return None
    known = series_noise(cp.run, cp.metric, cp.point)
    if known is not None and known.known:
        return known.relative * abs(cp.before)
    points = series_points(run=cp.previous_run, metric=cp.metric, until_run=cp.previous_run, point=cp.point,
                           newest=settings.BENCH_VERDICT_MAX_HISTORY)
    return judging.robust_noise([p.value for p in points])


def _figure(cp: ChangePoint, run: Run) -> float | None:
    """The re-run's figure of the change's metric; None when it failed or its output is wrong."""
    if run.state != Run.State.SUCCEEDED or Measurement.objects.filter(run=run, metric=contract.CORRECT, value=0).exists():
        return None
    measurement = point_measurements(cp.point).filter(run=run, metric=cp.metric).first()
    return run_figure(measurement) if measurement is not None else None


def _settle(cp: ChangePoint, run: Run) -> None:
    """Look at CP's re-runs so far, RUN the newest: alert when they agree, another re-run while
    they cannot tell (up to BENCH_CONFIRM_MAX_RUNS), else disagreed. A re-run that measured
    nothing (failed, wrong output) disagrees: it is no evidence of the change."""
    figure = _figure(cp, run)
    if figure is not None:
        cp.confirm_figures = [*cp.confirm_figures, figure]
    look = judging.confirmation_look(figures=cp.confirm_figures, before=cp.before, after=cp.after,
                                     noise=_noise_before(cp)) if figure is not None else judging.DISAGREES
    if look == judging.UNDECIDED and len(cp.confirm_figures) < settings.BENCH_CONFIRM_MAX_RUNS:
        try:
            cp.confirm_run = _shared_confirmation(cp) or _rerun(cp)  # another change's waiting re-run, or one more
            cp.save(update_fields=["confirm_figures", "confirm_run", "updated_at"])
            return
        except TriggerError as exc:
            log.warning("change point %s: no further confirmation run (%s)", cp.id, exc)
    if look == judging.AGREES:
        cp.confirmation = ChangePoint.Confirmation.AGREED
        if cp.status == ChangePoint.Status.OPEN:
            cp.status = ChangePoint.Status.CONFIRMED
            alerts_queue(change_point=cp)
    else:
        cp.confirmation = ChangePoint.Confirmation.DISAGREED
    cp.save(update_fields=["confirmation", "confirm_figures", "status", "updated_at"])
    if cp.status == ChangePoint.Status.CONFIRMED:
        change_point_changed.send(sender=ChangePoint, change_point=cp)


def confirmations_resolve(*, run: Run) -> list[ChangePoint]:
    """Settle the change points that `run` was the confirmation of; alert those it confirms."""
    settled = []
    with transaction.atomic():
        for cp in ChangePoint.objects.select_for_update().filter(confirm_run=run,
                                                                 confirmation=ChangePoint.Confirmation.PENDING):
            _settle(cp, run)
            settled.append(cp)
    return settled


def changepoint_from_verdict(*, run: Run, verdict: Verdict) -> ChangePoint | None:
    """A strong regression verdict (beyond the 99.9% prediction interval) is a change point
    candidate at once (the detector needs a few more runs); the detector's later finding within
    a few runs updates the same row. A merely significant one (95%) waits for the detector: one
    run in twenty of pure noise is that far off."""
    from .changepoints import MIN_SIZE

    if not verdict.strong:
        return None

    key = series_key(run, verdict.point)
    points: list[Point] = series_points(run=run, metric=verdict.metric, until_run=run, point=verdict.point)
    index = next((i for i, p in enumerate(points) if p.run.id == run.id), None)
    if index is None or index == 0 or verdict.baseline is None:
        return None
    nearby = {p.run.id for p in points[max(0, index - MIN_SIZE):]}
    if ChangePoint.objects.filter(series_key=key, metric=verdict.metric, run_id__in=nearby).exists():
        return None
    if unaccepted_change_runs(run, verdict.metric, verdict.point) & {p.run.id for p in points[:index]}:
        return None  # judged against the level before a change already known: the same change
    previous = points[index - 1].run
    return ChangePoint.objects.create(
        benchmark=run.benchmark, variant=run.variant, series_key=key, metric=verdict.metric, point=verdict.point, run=run,
        previous_run=previous, index=index, commit=run.commit, previous_commit=parent_commit(run, previous),
        before=verdict.baseline, after=verdict.value, change=verdict.effect, is_regression=True)


def changepoint_incorrect_output(*, run: Run) -> ChangePoint:
    """A newly incorrect output: a change point of 'correct' at this run (1 -> 0)."""
    previous = (Run.objects.filter(same_machine(run), main_line_q(run.benchmark), benchmark_id=run.benchmark_id,
                                   variant_id=run.variant_id, state=Run.State.SUCCEEDED, created_at__lt=run.created_at)
                .order_by("-created_at", "-id").first())
    cp, _ = ChangePoint.objects.get_or_create(
        series_key=series_key(run), metric=contract.CORRECT, run=run,
        defaults={"benchmark": run.benchmark, "variant": run.variant, "previous_run": previous, "index": 0,
                  "commit": run.commit, "previous_commit": parent_commit(run, previous),
                  "before": 1.0, "after": 0.0, "change": -1.0, "is_regression": True})
    return cp
