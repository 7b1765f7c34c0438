"""Acting on pull-request events: who may start a comparison, the comparisons themselves (runs
of both sides, interleaved on one host), superseding and cancelling. Reports go out through the
web queue once the transaction commits (tasks.queue_report)."""
from __future__ import annotations

import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from benchsite.bench.lifecycle import cancel, trigger
from benchsite.bench.models import Benchmark, Run
from benchsite.bench.worker.pools import pool_status
from runners.hostinfo import host_queue

from ..actions import Answer
from ..forges import FORGES
from .events import BENCH_COMMAND, BenchRequest, PullChanged, PullState
from .models import Comparison, PullAction, PullRequest, PullRun
from .settings import PullSettings
from .tasks import queue_report

log = logging.getLogger(__name__)
OPEN_STATES = (Comparison.State.WAITING, Comparison.State.QUEUED, Comparison.State.RUNNING)


def pull_event_handle(*, watch, delivery, event) -> Answer:
    settings = watch.pr_settings
    if settings is None:
        return Answer(200, f"pull-request checks are off for {watch.repo_key}: nothing queued")
    # One delivery of a repository at a time (the caller's transaction holds the lock): two
    # pushes of one PR handled at once would each supersede the other's comparison.
    type(watch).objects.select_for_update().filter(id=watch.id).first()
    if isinstance(event, PullChanged):
        pull = _upsert(watch, delivery.provider, event.pull)
        delivery.commit = pull.head_sha
        return _changed(pull, settings, event, delivery)
    pull = PullRequest.objects.filter(repo_key=watch.repo_key, number=event.number).first() if event.number else None
    if pull is None:
        return Answer(200, f"pull request #{event.number} of {watch.repo_key} was never delivered to this service "
                           "(no pull_request event): nothing queued")
    return _requested(pull, settings, event, delivery)


def _upsert(watch, provider: str, state: PullState) -> PullRequest:
    fields = {"watch": watch, "provider": provider, "title": state.title, "author": state.author, "url": state.url,
              "base_branch": state.base_branch, "head_branch": state.head_branch, "head_sha": state.head_sha,
              "head_repo": state.head_repo, "is_fork": state.is_fork, "draft": state.draft,
              "labels": list(state.labels)}
    pull, _ = PullRequest.objects.update_or_create(
        repo_key=watch.repo_key, number=state.number, defaults=fields)
    return pull


def _changed(pull: PullRequest, settings: PullSettings, event: PullChanged, delivery) -> Answer:
    if event.kind == "close":
        pull.state = PullRequest.State.MERGED if event.merged else PullRequest.State.CLOSED
        pull.save(update_fields=["state"])
        cancelled = comparisons_supersede(pull=pull, reason=f"pull request {pull.state}")
        return Answer(200, f"#{pull.number} {pull.state}: cancelled {len(cancelled)} queued run(s)", cancelled=cancelled)
    pull.state = PullRequest.State.OPEN
    pull.save(update_fields=["state"])
    if not pull.watch.branch_matches(pull.base_branch):
        return Answer(200, f"#{pull.number} merges into {pull.base_branch!r}, which matches no watched pattern "
                           f"{pull.watch.branches}: nothing queued")
    if event.kind == "label":
        if event.label != settings.label:
            return Answer(200, f"label {event.label!r} is not the watch's label {settings.label!r}: nothing queued")
        action_record(pull, "label", event.actor, accepted=True, detail=f"added label {event.label!r}")
    elif pull.draft and not settings.drafts:
        return Answer(200, f"#{pull.number} is a draft: drafts are not benchmarked (pull_requests.drafts: false)")
    elif settings.label and settings.label not in pull.labels:
        comparisons_supersede(pull=pull, reason="a newer push")
        return Answer(200, f"#{pull.number} has no label {settings.label!r}: nothing queued until it gets one")
    if pull.is_fork and not _approved(pull, settings):
        return _wait_for_maintainer(pull, settings)
    return comparisons_start(pull=pull, settings=settings, requested_by=f"{event.kind} by {event.actor or '?'}",
                             delivery=delivery)


def _approved(pull: PullRequest, settings: PullSettings) -> bool:
    """A fork's head runs once a member asked for this very head: new commits need a new request."""
    return pull.actions.filter(head_sha=pull.head_sha, accepted=True, kind__in=["label", BENCH_COMMAND]).exists()


def _requested(pull: PullRequest, settings: PullSettings, event: BenchRequest, delivery) -> Answer:
    if pull.state != PullRequest.State.OPEN:
        return Answer(200, f"#{pull.number} is {pull.state}: nothing queued")
    refusal = _refusal(pull, event)
    action_record(pull, event.kind, event.actor, association=event.association, accepted=not refusal,
            detail=refusal or f"{event.kind} accepted")
    if refusal:
        return Answer(200, f"refused: {refusal}")
    return comparisons_start(pull=pull, settings=settings, requested_by=f"{event.kind} by {event.actor or '?'}",
                             delivery=delivery)


def _refusal(pull: PullRequest, event: BenchRequest) -> str:
    if event.kind == "rerequested":
        asked = Comparison.objects.filter(id=event.external_id, pull=pull).first() if event.external_id.isdigit() else None
        if asked is None:
            return f"check run {event.check_run_id or '?'} names no comparison of #{pull.number}"
        if event.head_sha and event.head_sha != pull.head_sha:
            return f"check run of {event.head_sha[:12]}: #{pull.number}'s head is now {pull.head_sha[:12]}"
        return ""
    forge = FORGES.get(pull.provider)
    return forge.bench_comment_refusal(pull, event) if forge else ""


def action_record(pull: PullRequest, kind: str, actor: str, *, association: str = "", accepted: bool,
                  detail: str) -> None:
    PullAction.objects.create(pull=pull, head_sha=pull.head_sha, kind=kind, actor=actor[:100],
                              association=association[:30], accepted=accepted, detail=detail)


def _report_on_commit(comparison_ids) -> None:
    for comparison_id in comparison_ids:
        transaction.on_commit(partial(queue_report, comparison_id))


def _wait_for_maintainer(pull: PullRequest, settings: PullSettings) -> Answer:
    comparisons_supersede(pull=pull, reason="a newer push")
    asks = f"the label {settings.label!r} or " if settings.label else ""
    waiting = [Comparison.objects.create(pull=pull, benchmark=b, head_sha=pull.head_sha, base_branch=pull.base_branch,
                                         state=Comparison.State.WAITING, summary=f"waiting for a maintainer: {asks}"
                                         f"a {BENCH_COMMAND} comment from a member runs this fork's code")
               for b in pull.watch.benchmarks.order_by("slug")]
    _report_on_commit(c.id for c in waiting)
    return Answer(200, f"#{pull.number} comes from a fork: waiting for a maintainer ({asks}{BENCH_COMMAND} "
                       "from a member); nothing queued")


def comparisons_supersede(*, pull: PullRequest, reason: str) -> list[int]:
    """End the PR's open comparisons: their runs not yet finished are cancelled."""
    cancelled = []
    for comparison in Comparison.objects.select_for_update().filter(pull=pull, state__in=OPEN_STATES):
        for run in Run.objects.filter(pull_run__comparison=comparison, state__in=[Run.State.QUEUED, *Run.ACTIVE_STATES]):
            if cancel.run_cancel(run=run):
                cancelled.append(run.id)
        comparison.state, comparison.finished_at = Comparison.State.CANCELLED, timezone.now()
        comparison.summary = f"superseded: {reason}"
        comparison.save(update_fields=["state", "finished_at", "summary"])
        _report_on_commit([comparison.id])
    return cancelled


def pick_host(benchmark: Benchmark) -> str:
    """A live worker host of the benchmark's pool, idle if one is: both sides go to its own queue.
    '' when none was seen (the pool's queue; the comparison then checks the hosts it got)."""
    hosts = sorted({worker.rpartition("@")[2] for worker in pool_status(benchmark.gpu_pool)["workers"]})
    busy = set(Run.objects.filter(state__in=Run.ACTIVE_STATES, worker_host__in=hosts)
               .values_list("worker_host", flat=True))
    return next((h for h in hosts if h not in busy), hosts[0] if hosts else "")


def comparisons_start(*, pull: PullRequest, settings: PullSettings, requested_by: str, delivery=None) -> Answer:
    """Supersede the PR's open comparisons, then one per watched benchmark for the current head."""
    cancelled = comparisons_supersede(pull=pull, reason=f"{requested_by} at {pull.head_sha[:12]}")
    runs, skipped = [], []
    for benchmark in pull.watch.benchmarks.order_by("slug"):
        try:
            runs += comparison_queue(pull, benchmark, settings, requested_by)
        except trigger.TriggerError as exc:
            skipped.append(f"{benchmark.slug}: {exc}")
    if delivery is not None:
        delivery.runs.set(runs)
    detail = (f"queued {len(runs)} run(s): #{pull.number} at {pull.head_sha[:12]} against its merge base with "
              f"{pull.base_branch}")
    if cancelled:
        detail += f"; cancelled {len(cancelled)} queued run(s) of the earlier head"
    if skipped:
        detail += "; skipped " + "; ".join(skipped)
    return Answer(202 if runs else 200, detail, runs=[r.id for r in runs], cancelled=cancelled)


def comparison_queue(pull: PullRequest, benchmark: Benchmark, settings: PullSettings, requested_by: str) -> list[Run]:
    """`starts_per_side` rounds of base, head (comparison_round_queue); more are added while the
    comparison cannot decide, up to its cap (results.comparison_judge)."""
    try:
        cap = settings.cap(benchmark.max_starts_per_side)
    except ValueError as exc:
        raise trigger.TriggerError(str(exc)) from None
    comparison = Comparison.objects.create(
        pull=pull, benchmark=benchmark, head_sha=pull.head_sha, base_branch=pull.base_branch,
        starts_per_side=settings.starts_per_side, max_starts_per_side=cap, host=pick_host(benchmark),
        requested_by=requested_by[:200])
    runs = [run for round_ in range(1, settings.starts_per_side + 1)
            for run in comparison_round_queue(comparison, round_)]
    _report_on_commit([comparison.id])
    return runs


def comparison_round_queue(comparison: Comparison, round_: int) -> list[Run]:
    """One engine start of each side, every variant, base then head, sent to the comparison's
    host queue in that order so that the host's drift falls on both sides alike. The base side
    measures the merge base the first base run resolved, once known (the branch may move on)."""
    benchmark, merge_base = comparison.benchmark, comparison.merge_base
    queue = host_queue(benchmark.queue, comparison.host) if comparison.host else ""
    sides = {PullRun.Role.BASE: dict(ref=merge_base, commit=merge_base) if merge_base else
             dict(ref=comparison.head_sha, merge_base_with=comparison.base_branch),
             PullRun.Role.HEAD: dict(ref=comparison.head_sha, commit=comparison.head_sha)}
    # A later round measures what the first did, whatever bench_apply changed since (like=).
    firsts = list(comparison.pull_runs.filter(round=1).select_related("run__variant").order_by("run__variant__position"))
    runs = []
    for role, engine in sides.items():
        likes = [p.run for p in firsts if p.role == role] or [None]  # None: the benchmark's ladder, as it is
        created = [run for like in likes for run in trigger.runs_trigger(
            benchmark=benchmark, trigger=Run.Trigger.PULL, queue=queue, variants=like and [like.variant], like=like,
            **engine)]
        PullRun.objects.bulk_create(PullRun(run=r, comparison=comparison, role=role, round=round_) for r in created)
        runs += created
    Comparison.objects.filter(id=comparison.id).update(rounds=round_)
    comparison.rounds = round_
    return runs
