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
from .models import Comparison, PullAction, PullRequest, PullRun
from .payloads import BENCH_COMMAND, MEMBER_ASSOCIATIONS, BenchRequest, PullChanged, PullState
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
        _record(pull, "label", event.actor, accepted=True, detail=f"added label {event.label!r}")
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
    _record(pull, event.kind, event.actor, association=event.association, accepted=not refusal,
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
    if pull.provider == "github" and event.association not in MEMBER_ASSOCIATIONS:
        return (f"{BENCH_COMMAND} from {event.actor or '?'} (author_association {event.association or 'NONE'}): "
                f"only members, owners and collaborators may ask")
    if pull.provider == "gitlab" and pull.is_fork:  # a note does not say its author's role
        return f"{BENCH_COMMAND} on a merge request from a fork: a maintainer adds the watch's label instead"
    return ""


def _record(pull: PullRequest, kind: str, actor: str, *, association: str = "", accepted: bool, detail: str) -> None:
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
            runs += _comparison_runs(pull, benchmark, settings, requested_by)
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


def _comparison_runs(pull: PullRequest, benchmark: Benchmark, settings: PullSettings, requested_by: str) -> list[Run]:
    """base, head, base, head...: `starts_per_side` engine starts of each side, every variant,
    sent in that order to one host's queue so that its drift falls on both sides alike."""
    host = pick_host(benchmark)
    comparison = Comparison.objects.create(
        pull=pull, benchmark=benchmark, head_sha=pull.head_sha, base_branch=pull.base_branch,
        starts_per_side=settings.starts_per_side, host=host, requested_by=requested_by[:200])
    queue = host_queue(benchmark.queue, host) if host else ""
    runs = []
    for round_ in range(1, settings.starts_per_side + 1):
        for role in (PullRun.Role.BASE, PullRun.Role.HEAD):
            created = trigger.runs_trigger(
                benchmark=benchmark, trigger=Run.Trigger.PULL, ref=pull.head_sha, queue=queue,
                commit=pull.head_sha if role == PullRun.Role.HEAD else "",
                merge_base_with=pull.base_branch if role == PullRun.Role.BASE else "")
            PullRun.objects.bulk_create(PullRun(run=r, comparison=comparison, role=role, round=round_) for r in created)
            runs += created
    _report_on_commit([comparison.id])
    return runs
