"""What GitLab's merge-request and note events say, as plain values (the shapes of
pulls/events.py): pure, no database. A malformed payload is Refused (400) with the field it
lacks; an event this service does not act on is Ignored with the reason."""
from __future__ import annotations

from ..actions import Ignored
from ..pulls.events import (BENCH_COMMAND, BenchRequest, PullChanged, PullState, is_bench_comment, read_branch,
                            read_key, read_number, read_sha, read_text, read_section)

GITLAB_STARTS = ("open", "reopen")
GITLAB_ENDS = ("close", "merge")


def _gitlab_labels(payload: dict) -> tuple[str, ...]:
    return tuple(read_text(label.get("title"), 100) for label in payload.get("labels") or [] if isinstance(label, dict))


def gitlab_pull(attrs: dict, labels: tuple[str, ...] = ()) -> PullState:
    source = read_section(attrs, "source")
    return PullState(
        number=read_number(attrs.get("iid"), "object_attributes.iid"),
        head_sha=read_sha(read_section(attrs, "last_commit").get("id"), "object_attributes.last_commit.id"),
        base_branch=read_branch(attrs.get("target_branch"), "object_attributes.target_branch"),
        head_branch=read_text(attrs.get("source_branch"), 250),
        head_repo=read_key(source.get("git_http_url") or source.get("web_url")),
        is_fork=attrs.get("source_project_id") != attrs.get("target_project_id"),
        draft=bool(attrs.get("draft") or attrs.get("work_in_progress")), labels=labels,
        title=read_text(attrs.get("title")), url=read_text(attrs.get("url"), 500))


def _gitlab_label_added(payload: dict) -> str:
    change = read_section(payload, "changes", "labels")
    before = {label.get("title") for label in change.get("previous") or [] if isinstance(label, dict)}
    added = [label.get("title") for label in change.get("current") or []
             if isinstance(label, dict) and label.get("title") not in before]
    return read_text(added[0], 100) if added else ""


def gitlab_classify(event: str, payload: dict):
    """Merge Request Hook and Note Hook deliveries -> PullChanged, BenchRequest or Ignored."""
    actor = read_text(read_section(payload, "user").get("username"), 100)
    if event == "Merge Request Hook" or payload.get("object_kind") == "merge_request":
        attrs = read_section(payload, "object_attributes")
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
        attrs = read_section(payload, "object_attributes")
        if attrs.get("noteable_type") != "MergeRequest":
            return Ignored("a note that is not on a merge request")
        if not is_bench_comment(attrs.get("note")):
            return Ignored(f"a note that is not {BENCH_COMMAND}")
        mr = read_section(payload, "merge_request")
        return BenchRequest(BENCH_COMMAND, read_number(mr.get("iid"), "merge_request.iid"), actor)
    return None
