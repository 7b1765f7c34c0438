"""A benchmark's history is one line: the first-parent history of its main line, the engine
source's default ref, else `main`. Runs of other branches, or of no branch (a commit or a tag
asked for), are shown apart and never make change points on the line. A benchmark on the
worker's installed engine has no git and no branches: every run is on its line.

What a watch measures (its branch patterns) does not change which line is drawn."""
from __future__ import annotations

from django.db.models import Q

from ..models import Benchmark, EngineSource, Run

DEFAULT_MAIN_LINE = "main"


def main_line(benchmark: Benchmark) -> str:
    """The branch whose first-parent history the charts draw; "" for the installed engine."""
    source = benchmark.engine_source
    if source is None or source.kind != EngineSource.Kind.GIT:
        return ""
    return source.default_ref or DEFAULT_MAIN_LINE


def main_line_q(benchmark: Benchmark, prefix: str = "") -> Q:
    """Runs on BENCHMARK's line (PREFIX reaches the run from another model, e.g. "run__"); a
    pull request's runs never are, even at a commit of the line (its merge base)."""
    line = main_line(benchmark)
    not_pull = ~Q(**{f"{prefix}trigger": Run.Trigger.PULL})
    return Q(**{f"{prefix}branch": line}) & not_pull if line else not_pull


def on_main_line(run: Run) -> bool:
    line = main_line(run.benchmark)
    return run.trigger != Run.Trigger.PULL and (not line or run.branch == line)


def first_parent_order(commits: list[str], depths: dict[str, int]) -> list[str]:
    """COMMITS (in the order they first ran) in first-parent order: those whose depth the worker
    reported sorted by it, in the places they hold; the others (runs recorded before workers
    reported it) keep their place."""
    slots = [i for i, commit in enumerate(commits) if depths.get(commit) is not None]
    ordered = sorted((commits[i] for i in slots), key=lambda commit: depths[commit])
    result = list(commits)
    for slot, commit in zip(slots, ordered):
        result[slot] = commit
    return result
