"""The binary search of a bisection, pure: which commit to run next, given what is known.

`commits` is the first-parent history after the good commit, oldest first, ending with the bad
one (known bad). Outcomes: 'good', 'bad' or 'skip' (a build failure or a wrong output on that
commit: like `git bisect skip`, never taken for slow)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    """What a bisection does next: run `commit` ("test"), report `commit` as the first bad one
    ("found"), or stop with the `candidates` it cannot tell apart ("undecidable")."""
    action: str  # "test" | "found" | "undecidable"
    commit: str = ""
    candidates: tuple[str, ...] = ()


def bounds(commits: list[str], outcomes: dict[str, str]) -> tuple[int, int]:
    """The range still open: between the newest known good commit and the oldest known bad one.

    Parameters
    ----------
    commits : list of str
        The first-parent history after the good commit, oldest first, ending with the bad one.
    outcomes : dict of str to str
        Each commit run so far: 'good', 'bad' or 'skip'.

    Returns
    -------
    (int, int)
        The index of the newest known good commit (-1: the good end) and of the oldest known bad
        one (the last commit when none was run bad).
    """
    lo, hi = -1, len(commits) - 1
    for i, commit in enumerate(commits):
        if outcomes.get(commit) == "good":
            lo = max(lo, i)
        elif outcomes.get(commit) == "bad":
            hi = min(hi, i)
    return lo, hi


def next_step(commits: list[str], outcomes: dict[str, str]) -> Decision:
    """The next step of the binary search: the open commit nearest the middle of the open range
    (the older one on a tie), past skipped commits.

    Parameters
    ----------
    commits : list of str
        The first-parent history after the good commit, oldest first, ending with the bad one.
    outcomes : dict of str to str
        Each commit run so far: 'good', 'bad' or 'skip'.

    Returns
    -------
    Decision
        "found" with the oldest bad commit when the newest good one (or the good end) directly
        precedes it; "test" with the commit to run; "undecidable" when the outcomes contradict
        each other (a good commit after a bad one) or only skipped commits are left between them.

    Raises
    ------
    ValueError
        When `commits` is empty.

    References
    ----------
    .. [1] git-bisect(1), https://git-scm.com/docs/git-bisect (skip: a commit that cannot be
       tested).
    """
    if not commits:
        raise ValueError("no commit between good and bad")
    lo, hi = bounds(commits, outcomes)
    if lo >= hi:
        return Decision("undecidable", candidates=tuple(commits[hi:lo + 1]))  # results contradict
    if hi - lo == 1:
        return Decision("found", commit=commits[hi])
    open_ = [i for i in range(lo + 1, hi) if commits[i] not in outcomes]
    if not open_:
        return Decision("undecidable", candidates=tuple(commits[lo + 1:hi + 1]))
    mid = (lo + hi) / 2
    best = min(open_, key=lambda i: (abs(i - mid), i))  # the middle, or next to it past skips
    return Decision("test", commit=commits[best])
