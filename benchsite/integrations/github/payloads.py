"""What GitHub's pull_request, issue_comment and check_run events say, as plain values (the
shapes of pulls/events.py): pure, no database. A malformed payload is Refused (400) with the
field it lacks; an event this service does not act on is Ignored with the reason."""
from __future__ import annotations

from ..actions import Ignored, Refused
from ..pulls.events import (BENCH_COMMAND, CHECK_PREFIX, FULL_SHA, BenchRequest, CheckAction, PullChanged, PullState,
                            is_bench_comment, read_branch, read_key, read_number, read_section, read_sha, read_text)

# GitHub pull_request actions: which start a comparison, which cancel
GITHUB_STARTS = ("opened", "synchronize", "reopened", "ready_for_review")
MEMBER_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")  # a comment's author_association that may ask


def github_pull(pr: dict) -> PullState:
    head, base = read_section(pr, "head"), read_section(pr, "base")
    head_repo, base_repo = read_section(head, "repo"), read_section(base, "repo")
    head_key = read_key(head_repo.get("clone_url") or head_repo.get("html_url"))
    base_key = read_key(base_repo.get("clone_url") or base_repo.get("html_url"))
    # A fork's head lives in another repository (a deleted fork leaves `repo` null: outside, too).
    is_fork = not head_repo or head_key != base_key
    labels = tuple(read_text(label.get("name"), 100) for label in pr.get("labels") or [] if isinstance(label, dict))
    return PullState(
        number=read_number(pr.get("number"), "pull_request.number"),
        head_sha=read_sha(head.get("sha"), "pull_request.head.sha"),
        base_branch=read_branch(base.get("ref"), "pull_request.base.ref"),
        base_sha=base.get("sha") if isinstance(base.get("sha"), str) and FULL_SHA.match(base.get("sha")) else "",
        head_branch=read_text(head.get("ref"), 250), head_repo=head_key, is_fork=is_fork,
        draft=bool(pr.get("draft")), labels=labels, title=read_text(pr.get("title")),
        author=read_text(read_section(pr, "user").get("login"), 100), url=read_text(pr.get("html_url"), 500))


def github_classify(event: str, payload: dict):
    """pull_request, issue_comment and check_run deliveries -> PullChanged, BenchRequest or Ignored."""
    action = payload.get("action")
    actor = read_text(read_section(payload, "sender").get("login"), 100)
    if event == "pull_request":
        if not isinstance(payload.get("pull_request"), dict):
            raise Refused(400, "a pull_request delivery without `pull_request`")
        pull = github_pull(payload["pull_request"])
        if action in GITHUB_STARTS:
            return PullChanged("start", pull, actor)
        if action == "labeled":
            return PullChanged("label", pull, actor, label=read_text(read_section(payload, "label").get("name"), 100))
        if action == "closed":
            return PullChanged("close", pull, actor, merged=bool(payload["pull_request"].get("merged")))
        return Ignored(f"pull_request action {action!r} starts nothing")
    if event == "issue_comment":
        issue = read_section(payload, "issue")
        if not issue.get("pull_request"):
            return Ignored("a comment on an issue, not on a pull request")
        if action != "created":
            return Ignored(f"issue_comment action {action!r}: only new comments are read")
        comment = read_section(payload, "comment")
        if not is_bench_comment(comment.get("body")):
            return Ignored(f"a comment that is not {BENCH_COMMAND}")
        return BenchRequest(BENCH_COMMAND, read_number(issue.get("number"), "issue.number"),
                            read_text(read_section(comment, "user").get("login"), 100) or actor,
                            association=read_text(comment.get("author_association"), 30))
    if event == "check_run":
        run = read_section(payload, "check_run")
        name = read_text(run.get("name"), 200)
        if action not in ("rerequested", "requested_action") or not name.startswith(CHECK_PREFIX):
            return Ignored(f"check_run {action!r} of {name or 'another app'!r}: not ours to act on")
        numbers = [p.get("number") for p in run.get("pull_requests") or [] if isinstance(p, dict)]
        which = dict(number=numbers[0] if numbers and isinstance(numbers[0], int) else None, actor=actor,
                     check_run_id=str(run.get("id") or "")[:40], external_id=read_text(run.get("external_id"), 40),
                     head_sha=read_text(run.get("head_sha"), 64))
        if action == "requested_action":
            return CheckAction(read_text(read_section(payload, "requested_action").get("identifier"), 40), **which)
        return BenchRequest("rerequested", **which)
    if event == "check_suite":
        return Ignored("check_suite events are not acted on")
    return None
