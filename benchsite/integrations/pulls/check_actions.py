"""A button of our check run pressed on GitHub (check_buttons): the delivery names only who
pressed it, so GitHub is asked what that person may do on the repository; then Add starts or
Accept. Every press is recorded in the PR's actions, refusals with their reason."""
from __future__ import annotations

from functools import partial

from django.db import transaction
from django.utils import timezone

from benchsite.bench.lifecycle.trigger import TriggerError

from ..actions import Answer
from .check_buttons import ACCEPT, ADD_STARTS, BUTTONS, MEASURED
from ..forge_api import ReportRefused, TransientReportError
from ..forges import forge_for
from .events import CheckAction
from .models import Comparison, PullRequest
from .service import action_record, comparison_queue, comparison_round_queue
from .tasks import queue_report
from .wording import accepted_text

WRITERS = ("admin", "write")  # GitHub permissions that may merge (maintain is write): they may act on the check


def check_action_handle(*, watch, delivery, event: CheckAction) -> Answer:
    settings = watch.pr_settings
    if settings is None:
        return Answer(200, f"pull-request checks are off for {watch.repo_key}: nothing done")
    type(watch).objects.select_for_update().filter(id=watch.id).first()  # one delivery of a repository at a time
    pull = PullRequest.objects.filter(repo_key=watch.repo_key, number=event.number).first() if event.number else None
    if pull is None:
        return Answer(200, f"pull request #{event.number} of {watch.repo_key} was never delivered to this service: "
                           "nothing done")
    if event.identifier not in BUTTONS:
        action_record(pull, "check action", event.actor, accepted=False,
                      detail=f"unknown check-run action {event.identifier!r}: ignored")
        return Answer(200, f"unknown check-run action {event.identifier!r}: ignored")
    comparison = (Comparison.objects.select_for_update().select_related("benchmark")
                  .filter(id=event.external_id, pull=pull).first() if event.external_id.isdigit() else None)
    refusal = _refusal(pull, comparison, event) or _not_allowed(pull, event.actor)
    label = BUTTONS[event.identifier]["label"]
    action_record(pull, label, event.actor, accepted=not refusal,
                  detail=refusal or f"{label} on {comparison.check_name} ({comparison.outcome})")
    if refusal:
        return Answer(200, f"refused: {refusal}")
    if event.identifier == ACCEPT:
        return _accept(comparison, event.actor)
    return _add_starts(pull, settings, comparison, event.actor, delivery)


def _refusal(pull: PullRequest, comparison: Comparison | None, event: CheckAction) -> str:
    """Why this press cannot act on this comparison ('' when it can): checked before asking GitHub."""
    if pull.state != PullRequest.State.OPEN:
        return f"#{pull.number} is {pull.state}"
    if comparison is None:
        return f"check run {event.check_run_id or '?'} names no comparison of #{pull.number}"
    if comparison.head_sha != pull.head_sha or (event.head_sha and event.head_sha != pull.head_sha):
        return f"check run of {comparison.head_sha[:12]}: #{pull.number}'s head is now {pull.head_sha[:12]}"
    newest = pull.comparisons.filter(benchmark=comparison.benchmark).values_list("id", flat=True).first()
    if newest != comparison.id:
        return f"a newer comparison of {comparison.benchmark.slug} replaced this one"
    if comparison.state != Comparison.State.DONE:
        return f"{comparison.check_name} is {comparison.state}: it adds starts by itself while undecided"
    if event.identifier == ACCEPT and comparison.outcome != "regressed":
        return f"nothing to accept: {comparison.check_name} reads {comparison.outcome}"
    if event.identifier == ACCEPT and comparison.accepted_by:
        return f"already {accepted_text(comparison)}"
    if event.identifier == ADD_STARTS and comparison.outcome not in MEASURED:
        return f"more starts cannot change {comparison.outcome}: re-run the check instead"
    return ""


def _not_allowed(pull: PullRequest, actor: str) -> str:
    if not actor:
        return "the delivery names nobody who pressed the button"
    try:
        role, permission = forge_for(pull.provider).collaborator_access(pull.repo_key, actor)
    except (TransientReportError, ReportRefused) as exc:
        return f"GitHub did not say what {actor} may do on {pull.repo_key} ({exc}): press the button again"
    if permission not in WRITERS:
        return f"{actor} has {role!r} access to {pull.repo_key}: only admin, maintain or write may act"
    return ""


def _report(comparison_id: int) -> None:
    transaction.on_commit(partial(queue_report, comparison_id))


def _accept(comparison: Comparison, actor: str) -> Answer:
    comparison.accepted_by, comparison.accepted_at = actor[:100], timezone.now()
    comparison.save(update_fields=["accepted_by", "accepted_at"])
    _report(comparison.id)
    return Answer(200, f"{comparison.check_name}: {accepted_text(comparison)}")


def _add_starts(pull: PullRequest, settings, comparison: Comparison, actor: str, delivery) -> Answer:
    """One more start a side within the comparison's cap (its looks stay Pocock's schedule, so
    its false-alarm budget holds); at the cap, a new comparison with a budget of its own."""
    try:
        if comparison.rounds < comparison.max_starts_per_side:
            runs = _reopen(comparison, actor)
            detail = f"adding start {comparison.rounds} of up to {comparison.max_starts_per_side} a side"
        else:
            runs = comparison_queue(pull, comparison.benchmark, settings, f"Add starts by {actor}")
            detail = (f"{comparison.check_name} used its {comparison.max_starts_per_side} starts a side: "
                      f"a new comparison of {len(runs)} run(s)")
    except TriggerError as exc:
        return Answer(200, f"{comparison.check_name}: no more starts ({exc})")
    delivery.runs.set(runs)
    return Answer(202, detail, runs=[r.id for r in runs])


def _reopen(comparison: Comparison, actor: str) -> list:
    runs = comparison_round_queue(comparison, comparison.rounds + 1)
    comparison.state, comparison.finished_at = Comparison.State.RUNNING, None
    comparison.accepted_by, comparison.accepted_at = "", None  # what was accepted may read otherwise now
    comparison.summary = (f"adding start {comparison.rounds} of up to {comparison.max_starts_per_side} a side, "
                          f"asked by {actor}")
    comparison.save(update_fields=["state", "finished_at", "accepted_by", "accepted_at", "summary"])
    _report(comparison.id)
    return runs
