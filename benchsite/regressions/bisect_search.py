"""The binary search of a bisection, pure: which commit to run next, given what is known.

`commits` is the first-parent history after the good commit, oldest first, ending with the bad
one (known bad). Outcomes: 'good', 'bad' or 'skip' (a build failure or a wrong output on that
commit: like `git bisect skip`, never taken for slow)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    action: str  # "test" | "found" | "undecidable"
    commit: str = ""
    candidates: tuple[str, ...] = ()


def bounds(commits: list[str], outcomes: dict[str, str]) -> tuple[int, int]:
    """(index of the newest known good, -1 for the good end; index of the oldest known bad)."""
    lo, hi = -1, len(commits) - 1
    for i, commit in enumerate(commits):
        if outcomes.get(commit) == "good":
            lo = max(lo, i)
        elif outcomes.get(commit) == "bad":
            hi = min(hi, i)
    return lo, hi


def next_step(commits: list[str], outcomes: dict[str, str]) -> Decision:
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
