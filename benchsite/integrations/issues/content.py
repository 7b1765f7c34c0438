"""The words of a change point's issue: title, body (the table, the interval, the commits, the
bisection, links), and the comments that say why it was closed, reopened or bisected. Pure,
from IssueFacts and the repository's web address."""
from __future__ import annotations

from dataclasses import dataclass

from benchsite.bench.domain.units import change_text, interval_text, metric_label, metric_text
from benchsite.regressions.alerts import alert_links
from benchsite.regressions.models import Bisection, ChangePoint
from benchsite.regressions.detect.sensitivity import short_percent
from runners import contract

from ..forges import forge_for
from .state import IssueFacts

LABEL = "performance-regression"
MAX_TITLE = 250  # GitHub refuses titles over 256 characters, GitLab over 255
_LINK_WORDS = {"run": "run", "previous_run": "previous run", "confirm_run": "confirmation re-run",
               "changes": "changes of the benchmark", "benchmark": "benchmark"}


@dataclass(frozen=True)
class Wanted:
    title: str
    body: str
    open: bool
    close_reason: str   # the closing comment; '' while it should be open
    bisected: str       # the comment once the range's bisection concluded; '' before
    reopen: str         # the comment when a closed issue should be open again


def marker(cp: ChangePoint) -> str:
    """Hidden in the body: finds the issue again when the answer to its creation was lost. Whole,
    with its delimiters: change point 12's must not be found in change point 120's."""
    return f"<!-- decode-bench change point {cp.id} -->"


def _web(repo_key: str, forge: str, kind: str, ref: str) -> str:
    return forge_for(forge).web_url(repo_key, kind, ref)


def _commit(sha: str, repo_key: str, forge: str) -> str:
    return f"[`{sha[:12]}`]({_web(repo_key, forge, 'commit', sha)})" if contract.is_full_sha(sha) else f"`{sha or '?'}`"


def commits_text(cp: ChangePoint, repo_key: str, forge: str) -> str:
    if not cp.previous_commit or cp.previous_commit == cp.commit:
        return f"at {_commit(cp.commit, repo_key, forge)}"
    span = f"{cp.previous_commit}...{cp.commit}"
    return (f"[`{cp.previous_commit[:12]}..{cp.commit[:12]}`]({_web(repo_key, forge, 'compare', span)})"
            if contract.is_full_sha(cp.previous_commit) and contract.is_full_sha(cp.commit)
            else f"`{cp.previous_commit[:12]}..{(cp.commit or '?')[:12]}`")


def _what(cp: ChangePoint) -> str:
    if cp.metric == contract.CORRECT:
        return "output became incorrect"
    return f"{metric_label(cp.metric)} {change_text(cp.change)}"


def title(cp: ChangePoint) -> str:
    text = f"Regression: {_what(cp)} on {cp.benchmark.slug}/{cp.variant.name} at {(cp.commit or '?')[:12]}"
    return text[:MAX_TITLE]


def _table(facts: IssueFacts) -> list[str]:
    cp, verdict = facts.change_point, facts.verdict
    interval = interval_text(verdict.ci_low, verdict.ci_high) if verdict is not None else "–"
    threshold = short_percent(verdict.threshold) if verdict is not None else "–"
    return ["| benchmark | variant | metric | before | after | change | 95% interval | threshold |",
            "|---|---|---|---|---|---|---|---|",
            f"| {cp.benchmark.slug} | {cp.variant.name} | {metric_label(cp.metric)} "
            f"| {metric_text(cp.metric, cp.before)} | {metric_text(cp.metric, cp.after)} | {change_text(cp.change)} "
            f"| {interval} | {threshold} |"]


def bisection_text(bisection: Bisection | None, repo_key: str, forge: str) -> str:
    if bisection is None:
        return "none yet (a range of more than one commit is bisected once its changes are confirmed)"
    if bisection.state == Bisection.State.FOUND:
        return f"first bad commit {_commit(bisection.first_bad, repo_key, forge)}"
    if bisection.state == Bisection.State.RUNNING:
        return f"running over {len(bisection.commits)} commits"
    return f"{bisection.state}: {bisection.message}"


def _links(cp: ChangePoint) -> str:
    links = alert_links(cp)
    return " · ".join(f"[{_LINK_WORDS.get(key, key)}]({url})" for key, url in links.items())


def body(facts: IssueFacts, repo_key: str, forge: str) -> str:
    cp = facts.change_point
    return "\n".join([
        f"decode-bench confirmed a regression on **{cp.benchmark.slug}** / {cp.variant.name}: {_what(cp)}.", "",
        *_table(facts), "",
        f"- **Commits:** {commits_text(cp, repo_key, forge)}",
        f"- **Series:** `{cp.series_key}`{f' at point `{cp.point}`' if cp.point else ''}",
        f"- **Bisection:** {bisection_text(facts.bisection, repo_key, forge)}",
        f"- **Links:** {_links(cp)}", "",
        marker(cp)])


def close_reason(facts: IssueFacts, repo_key: str, forge: str) -> str:
    """Why the issue should be closed now; '' while it should stay open."""
    cp = facts.change_point
    by = f" by {cp.marked_by}" if cp.marked_by else ""
    on = f" on {cp.marked_at:%Y-%m-%d}" if cp.marked_at else ""
    if cp.status == ChangePoint.Status.EXPECTED:
        return (f"Closed: triaged as expected (an intended trade-off){by}{on}. "
                "Later runs are judged against the new level.")
    if cp.status == ChangePoint.Status.FALSE_ALARM:
        return f"Closed: triaged as a false alarm{by}{on}."
    later = facts.restored_by
    if later is not None:
        return (f"Closed: a later change restored the level. {metric_label(cp.metric)} went back to "
                f"{metric_text(cp.metric, later.after)} at {commits_text(later, repo_key, forge)} "
                f"(it was {metric_text(cp.metric, cp.before)} before this regression).")
    return ""


def bisected_comment(bisection: Bisection | None, repo_key: str, forge: str) -> str:
    if bisection is None or bisection.state == Bisection.State.RUNNING:
        return ""
    if bisection.state == Bisection.State.FOUND:
        return f"Bisected: {bisection_text(bisection, repo_key, forge)}."
    return f"The bisection ended without a first bad commit: {bisection_text(bisection, repo_key, forge)}."


def reopen_comment(cp: ChangePoint) -> str:
    by = f" by {cp.marked_by}" if cp.marked_by else ""
    return f"Reopened: the change was marked open again{by}."


def wanted(facts: IssueFacts, repo_key: str, forge: str) -> Wanted:
    reason = close_reason(facts, repo_key, forge)
    return Wanted(title=title(facts.change_point), body=body(facts, repo_key, forge), open=not reason,
                  close_reason=reason, bisected=bisected_comment(facts.bisection, repo_key, forge),
                  reopen=reopen_comment(facts.change_point))
