"""Reads of a pull request for its page and the API: the latest head's comparison per benchmark,
the PR's outcome over them, the earlier pushes and the actions. A fixed number of queries."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch
from django.urls import reverse

from benchsite.bench.lifecycle import outcome
from benchsite.bench.models import EngineSource

from .models import Comparison, PullAction, PullRequest, PullRun

_UNDER_WAY = (Comparison.State.WAITING, Comparison.State.QUEUED, Comparison.State.RUNNING)


@dataclass
class PullSummary:
    pull: PullRequest
    latest: list[Comparison]          # the head's newest comparison per benchmark
    missing: list[str]                # slugs of the watch's benchmarks with none at the head yet
    earlier: list[Comparison]         # every other comparison, newest first
    actions: list[PullAction]
    outcome: str | None = None        # the worst of `latest` (and pending for `missing`), WORST_FIRST
    outcome_final: bool = False
    runs: dict[int, list[PullRun]] = field(default_factory=dict)  # comparison id -> its runs


def pull_page_path(pull: PullRequest) -> str:
    """/pr/<host>/<owner/name...>/<number>/: the repository key, host first, then the number."""
    host, _, repo = pull.repo_key.partition("/")
    return reverse("hooks:pull", kwargs={"host": host, "repo": repo, "number": pull.number})


def pull_find(*, host: str, repo: str, number: int) -> PullRequest | None:
    if not 0 < number < 2 ** 31:  # past the column's range: a lookup would be a database error, not a miss
        return None
    key = f"{host}/{repo}".strip().strip("/").lower().removesuffix(".git")
    if "\x00" in key:  # PostgreSQL text cannot hold one: no such PR, not a database error
        return None
    return PullRequest.objects.select_related("watch").filter(repo_key=key, number=number).first()


def comparison_word(comparison: Comparison) -> str:
    """A comparison's outcome in a run's words: one not finished is pending, never a pass; a
    cancelled one (superseded, or the PR closed) was not judged."""
    if comparison.state in _UNDER_WAY:
        return outcome.PENDING
    if comparison.state == Comparison.State.CANCELLED:
        return outcome.NOT_JUDGED
    return comparison.outcome or outcome.NOT_JUDGED


def pull_outcome(latest: list[Comparison], missing: list[str], *, is_open: bool) -> tuple[str | None, bool]:
    """(worst word, final). A benchmark still to be compared reads as pending while the PR is
    open; once closed nothing more will come, so it was not judged. None: nothing to compare."""
    words = [(comparison_word(c), c.state not in _UNDER_WAY) for c in latest]
    words += [(outcome.PENDING if is_open else outcome.NOT_JUDGED, not is_open) for _ in missing]
    return outcome.commit_outcome(words)


def _expected_slugs(pull: PullRequest) -> list[str]:
    # An A/B of two commits needs a repository: benchmarks on the installed engine are not compared.
    return list(pull.watch.benchmarks.filter(engine_source__kind=EngineSource.Kind.GIT)
                .order_by("slug").values_list("slug", flat=True))


def pull_summary(pull: PullRequest) -> PullSummary:
    runs = PullRun.objects.select_related("run__variant").order_by("run__variant__position", "round", "role", "run_id")
    comparisons = list(pull.comparisons.select_related("benchmark")
                       .prefetch_related(Prefetch("pull_runs", queryset=runs, to_attr="ordered_runs")))
    latest: dict[str, Comparison] = {}
    for c in comparisons:  # newest first: the first of each benchmark at the head is its latest
        if c.head_sha == pull.head_sha and c.benchmark.slug not in latest:
            latest[c.benchmark.slug] = c
    chosen = {c.id for c in latest.values()}
    missing = [slug for slug in _expected_slugs(pull) if slug not in latest]
    word, final = pull_outcome(list(latest.values()), missing, is_open=pull.state == PullRequest.State.OPEN)
    return PullSummary(pull=pull, latest=sorted(latest.values(), key=lambda c: c.benchmark.slug), missing=missing,
                       earlier=[c for c in comparisons if c.id not in chosen], actions=list(pull.actions.all()),
                       outcome=word, outcome_final=final,
                       runs={c.id: c.ordered_runs for c in comparisons})


def run_pairs(pull_runs: list[PullRun]) -> list[tuple[PullRun, PullRun]]:
    """(base, head) of one variant and round: what the compare page shows side by side."""
    base = {(p.run.variant_id, p.round): p for p in pull_runs if p.role == PullRun.Role.BASE}
    return [(base[(p.run.variant_id, p.round)], p) for p in pull_runs
            if p.role == PullRun.Role.HEAD and (p.run.variant_id, p.round) in base]
