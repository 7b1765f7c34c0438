"""What a pull-request event says, whichever forge sent it, as plain values, and the readers of
its fields that the forges share (github/payloads.py, gitlab/payloads.py): pure, no database. A
malformed field is Refused (400) with the field it lacks."""
from __future__ import annotations

from dataclasses import dataclass

from ..actions import Refused
from ..forge_payloads import FULL_SHA
from benchsite.bench.domain.repos import RepoURLError, repo_key

MAX_COMMENT_CHARS = 65536  # GitHub's own limit for a comment body
BENCH_COMMAND = "/bench"
CHECK_PREFIX = "decode-bench/"


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


@dataclass(frozen=True)
class CheckAction:
    """A button of our check run was pressed (GitHub's `requested_action`): IDENTIFIER names it.
    The delivery says who pressed it, not what they may do."""

    identifier: str
    number: int | None
    actor: str
    check_run_id: str = ""
    external_id: str = ""
    head_sha: str = ""


def read_number(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
        raise Refused(400, f"{where} is not a pull request number (got {value!r})")
    return value


def read_sha(value, where: str) -> str:
    if not isinstance(value, str) or not FULL_SHA.match(value):
        raise Refused(400, f"{where} is missing or not a full commit SHA (got {value!r})")
    return value


def read_text(value, limit: int = 300) -> str:
    return value[:limit] if isinstance(value, str) else ""


def read_section(payload: dict, *path: str) -> dict:
    node = payload
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def read_branch(value, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 250:
        raise Refused(400, f"{where} is missing or not a branch name (got {value!r})")
    return value


def read_key(url) -> str:
    try:
        return repo_key(url) if isinstance(url, str) and url else ""
    except RepoURLError:
        return ""


def is_bench_comment(body) -> bool:
    """Is the comment a /bench request? Its first line is `/bench` (arguments after it are kept for later)."""
    if not isinstance(body, str):
        raise Refused(400, "the comment has no body")
    if len(body) > MAX_COMMENT_CHARS:
        raise Refused(400, f"the comment is {len(body)} characters long, over GitHub's {MAX_COMMENT_CHARS}")
    first = body.strip().splitlines()[0].strip() if body.strip() else ""
    return first == BENCH_COMMAND or first.startswith(BENCH_COMMAND + " ")
