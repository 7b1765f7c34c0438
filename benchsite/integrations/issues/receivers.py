"""Listener of the regressions app: which forge issues a change of a change point concerns, and
their synchronisation queued once the change commits."""
from __future__ import annotations

import logging
from functools import partial

from django.conf import settings
from django.db import transaction

from benchsite.regressions.models import ChangePoint

from ..forges import forge_of_repo
from ..models import RepoWatch
from .models import ForgeIssue

log = logging.getLogger(__name__)
SYNC_TASK = "hooks.sync_issue"


def _open_rows(cp: ChangePoint) -> None:
    """A row per watch with `issues: true` of CP's benchmark, for a confirmed regression."""
    if not cp.is_regression or cp.status != ChangePoint.Status.CONFIRMED:
        return
    for watch in RepoWatch.objects.filter(issues=True, benchmarks=cp.benchmark_id):
        forge = forge_of_repo(watch.repo_key)
        if forge is not None:
            ForgeIssue.objects.get_or_create(change_point=cp, watch=watch, defaults={"provider": forge.name})


def concerned_issues(cp: ChangePoint) -> list[int]:
    """The issues of CP, of the changes of its commit range (they share its bisection), and, for
    an improvement, of the earlier regressions of its series it may restore."""
    _open_rows(cp)
    rows = ForgeIssue.objects.filter(change_point__benchmark_id=cp.benchmark_id, change_point__commit=cp.commit)
    if not cp.commit:
        rows = ForgeIssue.objects.filter(change_point=cp)
    ids = set(rows.values_list("id", flat=True))
    if not cp.is_regression:
        earlier = ForgeIssue.objects.filter(change_point__series_key=cp.series_key, change_point__metric=cp.metric,
                                            change_point__point=cp.point,
                                            change_point__run__created_at__lt=cp.run.created_at)
        ids |= set(earlier.exclude(state="closed").values_list("id", flat=True))
    return sorted(ids)


def issues_follow_change(sender, change_point: ChangePoint, **kwargs) -> None:
    """Never raises: an issue must not fail the judgement that changed its change point."""
    try:
        for issue_id in concerned_issues(change_point):
            transaction.on_commit(partial(queue_sync, issue_id))
    except Exception:
        log.exception("could not follow change point %s with its forge issues", change_point.pk)


def queue_sync(issue_id: int) -> None:
    try:
        from benchsite.celery import app

        app.send_task(SYNC_TASK, args=[issue_id], queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # broker away: the change point's next change queues it again
        log.exception("could not queue forge issue %s", issue_id)
