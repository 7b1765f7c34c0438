"""Send at most once: each channel (check run, commit status, PR comment) sends under a row lock
and records in `comparison.reported` what it sent, so a retry or a repeated call never sends the
same again, and never creates a second check run or comment."""
from __future__ import annotations

from typing import Callable

from django.db import transaction

from ..forge_api import NotFound, call
from .markdown import comparison_markdown
from .models import Comparison, PullRequest
from .wording import digest

_RELATED = ("pull__watch", "benchmark")


def already_sent(reported: dict, channel: str, payload, target: object = "") -> bool:
    """Whether PAYLOAD is what CHANNEL last sent to TARGET, by the marks `record` leaves."""
    return reported.get(channel) == f"{digest(payload)}:{target}"


def record(reported: dict, channel: str, payload, target: object = "") -> dict:
    """REPORTED with CHANNEL's mark for PAYLOAD sent to TARGET (a new dict: JSONField-safe)."""
    return {**reported, channel: f"{digest(payload)}:{target}"}


def _locked(comparison_id: int) -> Comparison:
    return (Comparison.objects.select_for_update(of=("self",)).select_related(*_RELATED).get(id=comparison_id))


def send_once(comparison_id: int, channel: str, build: Callable[[Comparison], dict],
              send: Callable[[Comparison, dict], None], same: Callable[[dict], object] = lambda p: p) -> bool:
    """BUILD the payload and SEND it unless SAME(payload) was what CHANNEL last sent (SEND may set
    the comparison's check_run_id). True when sent."""
    with transaction.atomic():
        comparison = _locked(comparison_id)
        payload = build(comparison)
        # the check run's id is part of the mark: a comparison whose id was cleared gets a new one
        if comparison.reported.get(channel) == f"{digest(same(payload))}:{comparison.check_run_id}":
            return False
        send(comparison, payload)
        mark = f"{digest(same(payload))}:{comparison.check_run_id}"
        comparison.reported = {**comparison.reported, channel: mark}
        comparison.save(update_fields=["check_run_id", "reported"])
    return True


def latest_comparisons(pull: PullRequest, comparison: Comparison) -> list[Comparison]:
    """The PR's latest comparison of each benchmark at its current head (at COMPARISON's head
    when the current one has none yet)."""
    for head in dict.fromkeys([pull.head_sha, comparison.head_sha]):
        rows = (Comparison.objects.filter(pull=pull, head_sha=head).select_related(*_RELATED)
                .order_by("benchmark__slug", "-created_at", "-id"))
        latest = {}
        for row in rows:
            latest.setdefault(row.benchmark_id, row)
        if latest:
            return list(latest.values())
    return [comparison]


def comment_body(pull: PullRequest, comparison: Comparison) -> str:
    comparisons = latest_comparisons(pull, comparison)
    head = comparisons[0].head_sha[:12]
    return f"## decode-bench: {head} against its merge base\n\n" + comparison_markdown(comparisons)


def keep_one_comment(comparison_id: int, *, field: str, post_url: str, edit_url: Callable[[str], str],
                     edit_method: str, headers: Callable[[], dict]) -> bool:
    """Create the PR's one comment (its id in PullRequest.FIELD), then edit it in place; a comment
    someone deleted is created afresh. True when sent."""
    channel = field.removesuffix("_id")
    with transaction.atomic():
        pull_id = Comparison.objects.values_list("pull_id", flat=True).get(id=comparison_id)
        pull = PullRequest.objects.select_for_update().get(id=pull_id)
        comparison = _locked(comparison_id)
        body = comment_body(pull, comparison)
        if getattr(pull, field) and comparison.reported.get(channel) == f"{digest(body)}:{getattr(pull, field)}":
            return False
        sent_to = getattr(pull, field)
        if sent_to:
            try:
                call(edit_method, edit_url(sent_to), headers=headers(), json={"body": body})
            except NotFound:
                sent_to = ""
        if not sent_to:
            sent_to = str(call("POST", post_url, headers=headers(), json={"body": body})["id"])
            setattr(pull, field, sent_to)
            pull.save(update_fields=[field])
        comparison.reported = {**comparison.reported, channel: f"{digest(body)}:{sent_to}"}
        comparison.save(update_fields=["reported"])
    return True
