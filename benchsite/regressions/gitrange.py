"""The web side's view of a repository for bisection: the first-parent commits between a good
and a bad commit of a branch, from a bare mirror (runners.builder.git: argv only, refs checked,
transports limited; file:// only with BENCH_ALLOW_FILE_REPOS=1, as on workers)."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from runners.builder.errors import BuildFailure
from runners.builder.git import Git, Mirror
from runners.contract import SpecError, check_ref

GIT_TIMEOUT_S = 300


class RangeError(ValueError):
    """The range cannot be bisected (the message says why); nothing is scheduled."""


def _mirror(repo_url: str) -> Mirror:
    try:
        cache_dir = (Path(settings.VAR_DIR) / "bisect-git").absolute()
        git = Git(allow_file=settings.BENCH_ALLOW_FILE_REPOS, timeout_s=GIT_TIMEOUT_S, log=[])
        return Mirror(repo_url, cache_dir, git)
    except (SpecError, ValueError) as exc:
        raise RangeError(f"repository {repo_url!r} refused: {exc}") from None


def _first_parents(mirror: Mirror, sha: str) -> list[str]:
    return mirror.git.run("rev-list", "--first-parent", sha, git_dir=mirror.path).stdout.split()


def first_parent_range(*, repo_url: str, branch: str, good: str, bad: str) -> tuple[str, list[str]]:
    """(GOOD's full SHA, the commits after it up to BAD on BRANCH's first-parent history,
    oldest first)."""
    try:
        for ref in (branch, good, bad):
            check_ref(ref)
    except SpecError as exc:
        raise RangeError(str(exc)) from None
    mirror = _mirror(repo_url)
    try:
        if not mirror.ensure():
            mirror.fetch()
    except BuildFailure as exc:
        raise RangeError(f"repository {repo_url} cannot be fetched: {exc}") from None
    try:
        good_sha, bad_sha, tip = (mirror.resolve(ref) for ref in (good, bad, branch))
    except BuildFailure as exc:
        raise RangeError(str(exc)) from None
    try:
        mirror.git.run("merge-base", good_sha, bad_sha, git_dir=mirror.path)
    except BuildFailure:
        raise RangeError(f"{good} and {bad} are unrelated commits: they share no history") from None
    on_branch = _first_parents(mirror, tip)
    missing = [ref for ref, sha in ((good, good_sha), (bad, bad_sha)) if sha not in on_branch]
    if missing:
        raise RangeError(f"{', '.join(missing)} not on the first-parent history of branch {branch!r}")
    history = on_branch[on_branch.index(bad_sha):]
    if good_sha not in history or good_sha == bad_sha:
        raise RangeError(f"{good} is not an earlier commit than {bad} on {branch!r}")
    return good_sha, list(reversed(history[:history.index(good_sha)]))
