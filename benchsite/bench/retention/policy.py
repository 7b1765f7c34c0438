"""The retention policy in plain terms (no database): how long each artifact kind's files are
kept, the rules that keep a run's files longer, and whether an annotation marks a run."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from runners.contract import BUILD_LOG, PROFILER_TRACE, SERVER_LOG

TRACE_KINDS = (PROFILER_TRACE,)
LOG_KINDS = (SERVER_LOG, BUILD_LOG)
# probe_json is not here: it holds the greedy output that later runs' correctness is judged
# against, and it is small (docs/operations.md "Capacity"); like measurements, it is kept forever.

# Why a run keeps its files past the policy's days, checked in this order (the first that
# applies is the one reported). Every rule keeps forever except open_pull, which keeps while
# the pull request is open.
RULES = (
    ("confirmed_regression", "a confirmed regression: its first run after the change, the run before, "
                             "its confirmation and bisection runs"),
    ("change_point", "a change point: the first run after the change and the last run before it"),
    ("reference", "a correctness reference: each benchmark's current one, and both runs of a check that disagreed"),
    ("open_pull", "a head or base run of an open pull request (kept while it is open)"),
    ("annotated", "a run an annotation marks: by commit, or in its date range (an open range: its first day)"),
)
RULE_NAMES = tuple(name for name, _ in RULES)
OPEN_RANGE = timedelta(days=1)


@dataclass(frozen=True)
class Policy:
    """Days each kind of file is kept; 0 keeps it forever."""

    traces_days: int
    logs_days: int

    @classmethod
    def from_settings(cls) -> Policy:
        from django.conf import settings

        return cls(traces_days=settings.BENCH_RETAIN_TRACES_DAYS, logs_days=settings.BENCH_RETAIN_LOGS_DAYS)

    def days(self, kind: str) -> int:
        if kind in TRACE_KINDS:
            return self.traces_days
        if kind in LOG_KINDS:
            return self.logs_days
        return 0

    def reason(self, kind: str) -> str:
        """What the run page says after the file is gone: "traces are kept 30 days"."""
        return f"{'traces' if kind in TRACE_KINDS else 'logs'} are kept {self.days(kind)} days"

    def cutoffs(self, now: datetime) -> dict[str, datetime]:
        """Per kind that expires: files stored before this time may be freed."""
        return {kind: now - timedelta(days=self.days(kind)) for kind in TRACE_KINDS + LOG_KINDS if self.days(kind)}

    def lines(self) -> list[str]:
        """The policy in words, for bench_gc and the admin page."""
        def kept(days: int) -> str:
            return f"{days} days" if days else "forever"

        return [f"profiler traces: kept {kept(self.traces_days)} (BENCH_RETAIN_TRACES_DAYS)",
                f"server and build logs: kept {kept(self.logs_days)} (BENCH_RETAIN_LOGS_DAYS)",
                "probe outputs, measurements and runs: kept forever",
                *(f"kept longer, {text}" for _, text in RULES)]


def annotation_marks(*, commit: str, created_at: datetime, note_commit: str, starts_at: datetime | None,
                     ends_at: datetime | None) -> bool:
    """Whether a note marks a run: its commit prefix, or the run's time in its date range. An open
    range marks its first day only: a note where something began would otherwise keep every later
    run's files, and storage would grow without bound."""
    if note_commit:
        return bool(commit) and commit.startswith(note_commit)
    if starts_at is None:
        return False
    return starts_at <= created_at <= (ends_at or starts_at + OPEN_RANGE)
