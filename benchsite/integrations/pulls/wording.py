"""What each forge is told for a comparison's state and outcome: pure mappings and texts."""
from __future__ import annotations

import hashlib
import json

# A check run's conclusion: only a shown change beyond the threshold (or a wrong output, or a
# failure) fails the check; an interval that cannot tell, or no judgement, is neutral.
CONCLUSIONS = {"passed": "success", "improved": "success", "regressed": "failure", "incorrect": "failure",
               "failed": "failure", "inconclusive": "neutral", "not_judged": "neutral"}
CHECK_STATUS = {"waiting": "queued", "queued": "queued", "running": "in_progress"}
# A commit status's state for each outcome: github/checks.py, gitlab/reports.py.
CANCELLED_TEXT = "cancelled: superseded by a newer push, or the pull request was closed"
MAX_TITLE = 200


def waiting_text(comparison) -> str:
    watch_settings = _settings(comparison)
    label = watch_settings.label if watch_settings else None
    how = f"add the label `{label}` or comment `/bench`" if label else "comment `/bench`"
    return f"This pull request comes from a fork: a member of the repository must {how} to run the benchmark."


def _settings(comparison):
    try:
        return comparison.pull.watch.pr_settings
    except ValueError:  # a watch saved with bad settings: reporting goes on with the defaults
        return None


def comment_wanted(comparison) -> bool:
    watch_settings = _settings(comparison)
    return bool(watch_settings and watch_settings.comment)


def one_line(comparison) -> str:
    """State or outcome, and why: a commit status's description (cut by the caller)."""
    if comparison.state == "waiting":
        return "waiting for a maintainer: " + waiting_text(comparison).split(": ", 1)[1]
    if comparison.state == "cancelled":
        return cancelled_text(comparison)
    if comparison.state != "done":
        return comparison.state
    why = " ".join((comparison.summary or "").split())
    return (comparison.outcome or "done").replace("_", " ") + (f": {why}" if why else "")


def cancelled_text(comparison) -> str:
    """'cancelled: ' and why (superseded, closed) as the comparison says it, else in general."""
    why = " ".join((comparison.summary or "").split())
    return f"cancelled: {why}" if why else CANCELLED_TEXT


def check_conclusion(comparison) -> str:
    """A finished check's conclusion: a slowdown a maintainer accepted fails nothing (neutral)."""
    if comparison.state == "cancelled":
        return "cancelled"
    if comparison.accepted_by:
        return "neutral"
    return CONCLUSIONS.get(comparison.outcome, "neutral")


def accepted_text(comparison) -> str:
    """'accepted by alice on 2026-12-06 05:10 UTC: the slowdown is intended' ('' when not)."""
    if not comparison.accepted_by:
        return ""
    when = f" on {comparison.accepted_at:%Y-%m-%d %H:%M} UTC" if comparison.accepted_at else ""
    return f"accepted by {comparison.accepted_by}{when}: the slowdown is intended"


def check_title(comparison) -> str:
    if comparison.state == "waiting":
        return "waiting for a maintainer"
    if comparison.state == "cancelled":
        return "cancelled"
    if comparison.accepted_by:
        return f"{comparison.outcome}, {accepted_text(comparison)}"[:MAX_TITLE]
    return one_line(comparison)[:MAX_TITLE]


def digest(value) -> str:
    """A short fingerprint of what was sent, to recognise a repeat."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def starts_text(comparison) -> str:
    """'4 engine starts a side (began with 2; up to 6 while undecided)'."""
    used = comparison.rounds or comparison.starts_per_side
    text = f"{used} engine start{'s' if used != 1 else ''} a side"
    if comparison.max_starts_per_side > comparison.starts_per_side:
        text += f" (began with {comparison.starts_per_side}; up to {comparison.max_starts_per_side} while undecided)"
    return text

