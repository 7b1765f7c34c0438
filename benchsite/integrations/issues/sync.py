"""Bring one forge issue in line with its change point: open it once, edit it when its words
change (the bisection's result), comment once when bisected, close it with the reason, reopen
it when a triage is undone. Each call is recorded in the issue's ledger (`reported`) as soon as
it succeeds, under a row lock, so a retry or a second delivery sends nothing twice and never
opens a second issue."""
from __future__ import annotations

import logging

from django.db import transaction

from ..forge_api import ReportRefused, TransientReportError
from ..forges import forge_for
from ..pulls.ledger import already_sent, record
from .content import LABEL, Wanted, marker, wanted
from .models import ForgeIssue
from .state import issue_facts

log = logging.getLogger(__name__)


def _open(issue: ForgeIssue, client, want: Wanted) -> None:
    """Create the issue, unless an earlier attempt did and its answer was lost (found by marker)."""
    found = client.find(LABEL, marker(issue.change_point))
    if found is None:
        found = client.create(want.title, want.body, LABEL)
        issue.reported = record(issue.reported, "content", [want.title, want.body], found[0])
        if want.bisected:  # bisected before it was opened: the body says so, no comment needed
            issue.reported = record(issue.reported, "bisected", want.bisected, found[0])
    issue.number, issue.url = found
    issue.state = "open"


def _steps(issue: ForgeIssue, client, want: Wanted) -> None:
    if not issue.number:
        if not want.open:
            return  # triaged or restored before it was opened: no issue to tell
        _open(issue, client, want)
    content = [want.title, want.body]
    if not already_sent(issue.reported, "content", content, issue.number):
        client.edit(issue.number, want.title, want.body)
        issue.reported = record(issue.reported, "content", content, issue.number)
    if want.bisected and not already_sent(issue.reported, "bisected", want.bisected, issue.number):
        client.comment(issue.number, want.bisected)
        issue.reported = record(issue.reported, "bisected", want.bisected, issue.number)
    if not want.open and issue.state != "closed":
        _change_state(issue, client, "closed", want.close_reason)
    elif want.open and issue.state == "closed":
        _change_state(issue, client, "open", want.reopen)


def _change_state(issue: ForgeIssue, client, state: str, why: str) -> None:
    """The comment that says why, then the state; each recorded once it is done."""
    channel = f"{state}-comment"
    if not already_sent(issue.reported, channel, why, issue.number):
        client.comment(issue.number, why)
        issue.reported = record(issue.reported, channel, why, issue.number)
    if state == "closed":
        client.close(issue.number, planned=issue.change_point.status == issue.change_point.Status.CONFIRMED)
    else:
        client.reopen(issue.number)
    issue.state = state
    # a close after a reopen (or a reopen after a close) says its reason again
    other = "open-comment" if state == "closed" else "closed-comment"
    issue.reported = {k: v for k, v in issue.reported.items() if k != other}


def issue_sync(*, issue_id: int) -> bool:
    """Send what the issue lacks. True when in line (or nothing to do); False when the forge
    refused for good (recorded and logged); raises TransientReportError when a retry may help,
    with what was sent before the failure recorded."""
    error = None
    with transaction.atomic():
        issue = (ForgeIssue.objects.select_for_update(of=("self",))
                 .select_related("change_point__benchmark", "change_point__variant", "change_point__run", "watch")
                 .get(id=issue_id))
        facts = issue_facts(issue.change_point)
        want = wanted(facts, issue.watch.repo_key, issue.provider)
        try:
            _steps(issue, forge_for(issue.provider).issues(issue.watch.repo_key), want)
            issue.last_error = ""
        except (TransientReportError, ReportRefused) as exc:
            error = exc
            issue.attempts, issue.last_error = issue.attempts + 1, str(exc)[:2000]
        issue.save()
    if isinstance(error, TransientReportError):
        raise error
    if error is not None:
        log.error("issue of change point %s on %s not sent: %s", issue.change_point_id, issue.watch.repo_key, error)
        return False
    return True
