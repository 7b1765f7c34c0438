"""Which runs keep their files past the policy's days, and by which rule (policy.RULES).

Asked a batch of runs at a time, with a constant number of queries per batch, so bench_gc's
memory and time stay bounded on a million runs. bench knows its own rules (references,
annotations); the apps that own change points and pull requests register theirs at start
(`register`, from their AppConfig.ready), as they listen to bench's signals: bench imports
neither. A rule left unregistered stops bench_gc rather than freeing files it should keep."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from runners.contract import CORRECT, GREEDY_ARTIFACT

from ..models import Annotation, Measurement, Run, Variant
from .policy import RULE_NAMES, annotation_marks

RuleCheck = Callable[[set[int]], set[int]]  # run ids -> those the rule keeps
_registered: dict[str, RuleCheck] = {}


class RuleMissing(RuntimeError):
    """A keep rule has no check registered: nothing may be freed."""


def register(name: str, check: RuleCheck) -> None:
    """Give the keep rule NAME (one of policy.RULE_NAMES) its check."""
    if name not in RULE_NAMES:
        raise ValueError(f"unknown keep rule {name!r}: expected one of {', '.join(RULE_NAMES)}")
    _registered[name] = check


@dataclass(frozen=True)
class RunFacts:
    id: int
    benchmark_id: int
    commit: str
    created_at: datetime


class Protector:
    """The keep rules over batches of runs; what never changes during one pass (each benchmark's
    current reference run, the disagreeing correctness checks, the annotations) is read once."""

    def __init__(self):
        self._current_references: set[int] | None = None
        self._disagreed: set[int] | None = None
        self._notes: dict[int, list] | None = None

    def current_references(self) -> set[int]:
        """Each benchmark's newest successful run of its reference variant with a greedy output:
        the one the next runs' correctness is judged against (lifecycle/checks.py)."""
        if self._current_references is None:
            self._current_references = set()
            for variant in _reference_variants():
                run = (Run.objects.filter(variant=variant, state=Run.State.SUCCEEDED, artifacts__name=GREEDY_ARTIFACT)
                       .exclude(trigger=Run.Trigger.PULL).order_by("-created_at", "-id").values_list("id", flat=True)
                       .first())
                if run is not None:
                    self._current_references.add(run)
        return self._current_references

    def disagreed(self) -> set[int]:
        """Both runs of every correctness check that disagreed: the candidate and the reference it
        was compared with. Rare, so read once per pass (one scan of the `correct` figures, not one
        per batch)."""
        if self._disagreed is None:
            rows = Measurement.all_points.filter(metric=CORRECT, value=0).values_list("run_id", "details__reference_run")
            self._disagreed = {int(run) for row in rows for run in row if run is not None}
        return self._disagreed

    def _reference(self, ids: set[int]) -> set[int]:
        return (self.disagreed() | self.current_references()) & ids

    def _annotated(self, runs: list[RunFacts]) -> set[int]:
        if self._notes is None:
            self._notes = defaultdict(list)
            for note in Annotation.objects.only("benchmark_id", "commit", "starts_at", "ends_at"):
                self._notes[note.benchmark_id].append(note)
        return {run.id for run in runs for note in self._notes.get(run.benchmark_id, ())
                if annotation_marks(commit=run.commit, created_at=run.created_at, note_commit=note.commit,
                                    starts_at=note.starts_at, ends_at=note.ends_at)}

    def rules_for(self, runs: list[RunFacts]) -> dict[int, str]:
        """{run id: the first rule that keeps it} for the protected runs among RUNS."""
        ids = {run.id for run in runs}
        checks = {**_registered, "reference": self._reference, "annotated": lambda _ids: self._annotated(runs)}
        missing = [name for name in RULE_NAMES if name not in checks]
        if missing:
            raise RuleMissing(f"keep rule(s) {', '.join(missing)} not registered (is their app installed?): "
                              "nothing is freed without them")
        found = {name: checks[name](ids) for name in RULE_NAMES}
        kept: dict[int, str] = {}
        for rule in RULE_NAMES:
            for run_id in found[rule]:
                kept.setdefault(run_id, rule)
        return kept


def _reference_variants() -> list[Variant]:
    """Per benchmark, its reference variant, else its first (as lifecycle/checks.py chooses)."""
    chosen: dict[int, Variant] = {}
    for variant in Variant.objects.order_by("benchmark_id", "-is_reference", "position"):
        chosen.setdefault(variant.benchmark_id, variant)
    return list(chosen.values())
