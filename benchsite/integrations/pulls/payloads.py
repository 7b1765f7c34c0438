"""What GitHub's pull_request, issue_comment and check_run events and GitLab's merge-request and
note events say, as plain values: pure, no database. A malformed payload is Refused (400) with
the field it lacks; an event this service does not act on is Ignored with the reason."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..actions import Ignored, Refused
from ..repos import RepoURLError, repo_key

_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
MAX_COMMENT_CHARS = 65536  # GitHub's own limit for a comment body
BENCH_COMMAND = "/bench"
CHECK_PREFIX = "decode-bench/"
MEMBER_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")

# GitHub pull_request actions: which start a comparison, which cancel
GITHUB_STARTS = ("opened", "synchronize", "reopened", "ready_for_review")
GITLAB_STARTS = ("open", "reopen")
GITLAB_ENDS = ("close", "merge")


@dataclass(frozen=True)
class PullState:
    """A pull request as one delivery shows it."""

    number: int
    head_sha: str
    base_branch: str
    base_sha: str = ""
    head_branch: str = ""
    head_repo: str = ""
    is_fork: bool = False
    draft: bool = False
    labels: tuple[str, ...] = ()
    title: str = ""
    author: str = ""
    url: str = ""


@dataclass(frozen=True)
class PullChanged:
    """A PR was opened, got new commits, was reopened or marked ready (`start`), was labelled
    (`label`: the label added), or was closed or merged (`close`)."""

    kind: str  # start, label, close
    pull: PullState
    actor: str = ""
    label: str = ""
    merged: bool = False


@dataclass(frozen=True)
class BenchRequest:
    """Someone asked for a comparison: a `/bench` comment, or our check run's Re-run button."""

    kind: str  # "/bench" or "rerequested"
    number: int | None
    actor: str
    association: str = ""
    check_run_id: str = ""
    external_id: str = ""
    head_sha: str = ""


def _number(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise Refused(400, f"{where} is not a pull request number (got {value!r})")
    return value


def _sha(value, where: str) -> str:
    if not isinstance(value, str) or not _SHA.match(value):
        raise Refused(400, f"{where} is missing or not a full commit SHA (got {value!r})")
    return value


def _text(value, limit: int = 300) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _section(payload: dict, *path: str) -> dict:
    node = payload
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _branch(value, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 250:
        raise Refused(400, f"{where} is missing or not a branch name (got {value!r})")
    return value


def _key(url) -> str:
    try:
        return repo_key(url) if isinstance(url, str) and url else ""
    except RepoURLError:
        return ""


def _comment_command(body) -> bool:
    """Is the comment a /bench request? Its first line is `/bench` (arguments after it are kept for later)."""
    if not isinstance(body, str):
        raise Refused(400, "the comment has no body")
    if len(body) > MAX_COMMENT_CHARS:
        raise Refused(400, f"the comment is {len(body)} characters long, over GitHub's {MAX_COMMENT_CHARS}")
    first = body.strip().splitlines()[0].strip() if body.strip() else ""
    return first == BENCH_COMMAND or first.startswith(BENCH_COMMAND + " ")


# --- GitHub --------------------------------------------------------------------------------


def github_pull(pr: dict) -> PullState:
    head, base = _section(pr, "head"), _section(pr, "base")
    head_repo, base_repo = _section(head, "repo"), _section(base, "repo")
    head_key = _key(head_repo.get("clone_url") or head_repo.get("html_url"))
    base_key = _key(base_repo.get("clone_url") or base_repo.get("html_url"))
    # A fork's head lives in another repository (a deleted fork leaves `repo` null: outside, too).
    is_fork = not head_repo or head_key != base_key
    labels = tuple(_text(label.get("name"), 100) for label in pr.get("labels") or [] if isinstance(label, dict))
    return PullState(
        number=_number(pr.get("number"), "pull_request.number"),
        head_sha=_sha(head.get("sha"), "pull_request.head.sha"),
        base_branch=_branch(base.get("ref"), "pull_request.base.ref"),
        base_sha=base.get("sha") if isinstance(base.get("sha"), str) and _SHA.match(base.get("sha")) else "",
        head_branch=_text(head.get("ref"), 250), head_repo=head_key, is_fork=is_fork,
        draft=bool(pr.get("draft")), labels=labels, title=_text(pr.get("title")),
        author=_text(_section(pr, "user").get("login"), 100), url=_text(pr.get("html_url"), 500))


def github_classify(event: str, payload: dict):
    """pull_request, issue_comment and check_run deliveries -> PullChanged, BenchRequest or Ignored."""
    action = payload.get("action")
    actor = _text(_section(payload, "sender").get("login"), 100)
    if event == "pull_request":
        if not isinstance(payload.get("pull_request"), dict):
            raise Refused(400, "a pull_request delivery without `pull_request`")
        pull = github_pull(payload["pull_request"])
        if action in GITHUB_STARTS:
            return PullChanged("start", pull, actor)
        if action == "labeled":
            return PullChanged("label", pull, actor, label=_text(_section(payload, "label").get("name"), 100))
        if action == "closed":
            return PullChanged("close", pull, actor, merged=bool(payload["pull_request"].get("merged")))
        return Ignored(f"pull_request action {action!r} starts nothing")
    if event == "issue_comment":
        issue = _section(payload, "issue")
        if not issue.get("pull_request"):
            return Ignored("a comment on an issue, not on a pull request")
        if action != "created":
            return Ignored(f"issue_comment action {action!r}: only new comments are read")
        comment = _section(payload, "comment")
        if not _comment_command(comment.get("body")):
            return Ignored(f"a comment that is not {BENCH_COMMAND}")
        return BenchRequest(BENCH_COMMAND, _number(issue.get("number"), "issue.number"),
                            _text(_section(comment, "user").get("login"), 100) or actor,
                            association=_text(comment.get("author_association"), 30))
    if event == "check_run":
        run = _section(payload, "check_run")
        name = _text(run.get("name"), 200)
        if action != "rerequested" or not name.startswith(CHECK_PREFIX):
            return Ignored(f"check_run {action!r} of {name or 'another app'!r}: not ours to act on")
        numbers = [p.get("number") for p in run.get("pull_requests") or [] if isinstance(p, dict)]
        return BenchRequest("rerequested", numbers[0] if numbers and isinstance(numbers[0], int) else None, actor,
                            check_run_id=str(run.get("id") or "")[:40], external_id=_text(run.get("external_id"), 40),
                            head_sha=_text(run.get("head_sha"), 64))
    if event == "check_suite":
        return Ignored("check_suite events are not acted on")
    return None


# --- GitLab --------------------------------------------------------------------------------


def _gitlab_labels(payload: dict) -> tuple[str, ...]:
    return tuple(_text(label.get("title"), 100) for label in payload.get("labels") or [] if isinstance(label, dict))


def gitlab_pull(attrs: dict, labels: tuple[str, ...] = ()) -> PullState:
    source = _section(attrs, "source")
    return PullState(
        number=_number(attrs.get("iid"), "object_attributes.iid"),
        head_sha=_sha(_section(attrs, "last_commit").get("id"), "object_attributes.last_commit.id"),
        base_branch=_branch(attrs.get("target_branch"), "object_attributes.target_branch"),
        head_branch=_text(attrs.get("source_branch"), 250),
        head_repo=_key(source.get("git_http_url") or source.get("web_url")),
        is_fork=attrs.get("source_project_id") != attrs.get("target_project_id"),
        draft=bool(attrs.get("draft") or attrs.get("work_in_progress")), labels=labels,
        title=_text(attrs.get("title")), url=_text(attrs.get("url"), 500))


def _gitlab_label_added(payload: dict) -> str:
    change = _section(payload, "changes", "labels")
    before = {label.get("title") for label in change.get("previous") or [] if isinstance(label, dict)}
    added = [label.get("title") for label in change.get("current") or []
             if isinstance(label, dict) and label.get("title") not in before]
    return _text(added[0], 100) if added else ""


def gitlab_classify(event: str, payload: dict):
    """Merge Request Hook and Note Hook deliveries -> PullChanged, BenchRequest or Ignored."""
    actor = _text(_section(payload, "user").get("username"), 100)
    if event == "Merge Request Hook" or payload.get("object_kind") == "merge_request":
        attrs = _section(payload, "object_attributes")
        pull = gitlab_pull(attrs, _gitlab_labels(payload))
        action = attrs.get("action")
        if action in GITLAB_STARTS or (action == "update" and attrs.get("oldrev")):
            return PullChanged("start", pull, actor)
        if action == "update" and (label := _gitlab_label_added(payload)):
            return PullChanged("label", pull, actor, label=label)
        if action in GITLAB_ENDS:
            return PullChanged("close", pull, actor, merged=action == "merge")
        return Ignored(f"merge request action {action!r} starts nothing")
    if event == "Note Hook" or payload.get("object_kind") == "note":
        attrs = _section(payload, "object_attributes")
        if attrs.get("noteable_type") != "MergeRequest":
            return Ignored("a note that is not on a merge request")
        if not _comment_command(attrs.get("note")):
            return Ignored(f"a note that is not {BENCH_COMMAND}")
        mr = _section(payload, "merge_request")
        return BenchRequest(BENCH_COMMAND, _number(mr.get("iid"), "merge_request.iid"), actor)
    return None
