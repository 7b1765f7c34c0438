"""Runs' and commits' outcomes from the database: the facts each rule of bench/lifecycle/outcome.py needs,
stored on the run whenever they change, and a commit's outcome from the runs that count."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from functools import partial

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from benchsite.bench.lifecycle import outcome as rules
from benchsite.bench.models import Run
from benchsite.bench.lifecycle.signals import outcome_changed
from benchsite.bench.domain import home_cache
from runners import contract

from .detect import judging
from .models import ChangePoint

log = logging.getLogger(__name__)
Status, Confirmation = ChangePoint.Status, ChangePoint.Confirmation


def confirmation_state(run: Run) -> tuple[bool, bool]:
    """(a confirmation re-run of a change starting at `run` is due, a second look may still
    come): read from the change points' confirmation state alone."""
    due = may_change = False
    for cp in run.change_points.filter(is_regression=True, status=Status.OPEN):
        if cp.confirmation == Confirmation.PENDING:
            due = True
        elif cp.confirmation == Confirmation.DISAGREED and cp.confirm_attempts == 1:
            # The second look comes once SECOND_LOOK_AFTER runs follow the change and the
            # detector still finds it there; a change not looked at again by then is settled.
            later = (type(run)._default_manager.filter(
                benchmark_id=run.benchmark_id, variant_id=run.variant_id, state=Run.State.SUCCEEDED,
                created_at__gt=run.created_at, bisect_steps__isnull=True, canary_run__isnull=True)
                .exclude(commit=run.commit).exclude(trigger=Run.Trigger.PULL).count())
            may_change = may_change or later < judging.SECOND_LOOK_AFTER
    return due, may_change


def run_facts(run: Run) -> rules.RunFacts:
    """Through the run's own relations only: a migration's historical Run works too."""
    correct = run.measurements.filter(metric=contract.CORRECT).values_list("value", flat=True).first()
    verdicts = tuple(rules.VerdictFact(metric=v.metric, kind=v.kind, effect=v.effect, ci_low=v.ci_low,
                                       ci_high=v.ci_high, threshold=v.threshold)
                     for v in run.verdicts.exclude(metric=contract.CORRECT))
    overruled, confirmed = set(), set()
    for cp in run.change_points.filter(is_regression=True).exclude(metric=contract.CORRECT):
        if cp.confirmation == Confirmation.DISAGREED or cp.status == Status.FALSE_ALARM:
            overruled.add(cp.metric)
        elif cp.confirmation == Confirmation.AGREED or cp.status == Status.CONFIRMED:
            confirmed.add(cp.metric)
    due, may_change = confirmation_state(run) if run.state == Run.State.SUCCEEDED else (False, False)
    return rules.RunFacts(state=run.state, correct=correct, verdicts=verdicts, overruled=frozenset(overruled),
                          confirmed=frozenset(confirmed), confirmation_due=due, may_change=may_change)


def outcomes_refresh(*, run_ids, announce=()) -> list[int]:
    """Recompute and store the outcome of each run; `outcome_changed` goes out (once committed)
    for each run whose outcome or finality changed, and for those in `announce` (just finished)."""
    changed = []
    for run in Run.objects.filter(id__in=set(run_ids)):
        word, final = rules.run_outcome(run_facts(run))
        if (word, final) != (run.outcome, run.outcome_final):
            Run.objects.filter(id=run.id).update(outcome=word, outcome_final=final)
            home_cache.note_change(run.benchmark_id)  # an update sends no signal: the home page's version
            changed.append(run.id)
    for run_id in sorted(set(changed) | set(announce)):
        transaction.on_commit(partial(outcome_changed.send, sender=Run, run_id=run_id))
    return changed


@contextmanager
def refreshed_after_judging(run_id: int):
    """Judging a finished run can change other runs' outcomes too: its batch's correctness (a
    reference run judges the others), change points found or moved at earlier runs, the
    confirmations it settles, a second look no longer to come. Refreshes all of them after the
    block, even when the block fails, and announces the run."""
    run = Run.objects.get(id=run_id)
    since = timezone.now()
    variant_cps = ChangePoint.objects.filter(benchmark_id=run.benchmark_id, variant_id=run.variant_id)
    before = dict(variant_cps.values_list("id", "run_id"))
    try:
        yield
    finally:
        touched = {run_id, *Run.objects.filter(batch=run.batch).values_list("id", flat=True)}
        for cp_id, cp_run, confirm_run in variant_cps.filter(updated_at__gte=since).values_list(
                "id", "run_id", "confirm_run_id"):
            touched.update({cp_run, confirm_run, before.get(cp_id)})
        touched.update(variant_cps.filter(status=Status.OPEN, confirmation=Confirmation.DISAGREED,
                                          confirm_attempts=1).values_list("run_id", flat=True))
        outcomes_refresh(run_ids=touched - {None}, announce=[run_id])


# --- commits ---------------------------------------------------------------------------------


def counted_runs(runs: QuerySet[Run]) -> QuerySet[Run]:
    """The runs that decide a commit's outcome: pushes, form and API runs and the confirmation
    re-runs of its changes; bisection steps and canary runs measure other questions."""
    return runs.filter(bisect_steps__isnull=True, canary_run__isnull=True).exclude(trigger=Run.Trigger.PULL)


def commit_runs_query(commit: str, runs: QuerySet[Run] | None = None) -> QuerySet[Run]:
    """COMMIT's counted runs (of RUNS, default every run), oldest first. The joins that leave out
    bisection steps and canary runs keep one row a run: no DISTINCT needed."""
    return counted_runs((Run.objects.all() if runs is None else runs).filter(commit=commit)).order_by("created_at", "id")


def commit_runs(commit: str) -> list[Run]:
    return list(commit_runs_query(commit).select_related("benchmark", "variant"))


def commit_outcome(runs: list[Run]) -> tuple[str | None, bool]:
    return rules.commit_outcome([(r.outcome, r.outcome_final) for r in runs])
