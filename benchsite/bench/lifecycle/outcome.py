"""What a run found, and what a commit's runs found, in one word: the rules, pure (no database).

`Run.state` says how a run executed; its outcome says what it found. The facts come from the
run's correctness measurement, its verdicts and the confirmation state of its change points
(benchsite.regressions.outcomes gathers them and stores the result on the run)."""
from __future__ import annotations

from dataclasses import dataclass, field

PENDING, INCORRECT, REGRESSED, IMPROVED = "pending", "incorrect", "regressed", "improved"
PASSED, INCONCLUSIVE, NOT_JUDGED, FAILED = "passed", "inconclusive", "not_judged", "failed"
# Worst first: a commit's outcome is the first of these that any of its runs has.
WORST_FIRST = (INCORRECT, REGRESSED, FAILED, PENDING, INCONCLUSIVE, NOT_JUDGED, IMPROVED, PASSED)
# Within one run, among its judged metrics (any regression wins over an improvement).
_JUDGED_WORST_FIRST = (REGRESSED, INCONCLUSIVE, IMPROVED, PASSED)

_UNFINISHED = ("QUEUED", "BUILDING", "RUNNING")
_DID_NOT_FINISH = ("FAILED", "CANCELLED")

# Verdict kinds (regressions.Verdict.Kind's values)
_REGRESSION, _IMPROVEMENT, _NO_CHANGE = "regression", "improvement", "no_change"


@dataclass(frozen=True)
class VerdictFact:
    metric: str
    kind: str
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    threshold: float = 0.0


@dataclass(frozen=True)
class RunFacts:
    """What decides a run's outcome.

    `correct`: the correctness measurement (1, 0) or None when not judged. `overruled`: metrics
    whose regression a re-run of the commit contradicted (or a user marked a false alarm).
    `confirmed`: metrics whose change starting at this run a re-run confirmed. `confirmation_due`:
    a re-run of this run's commit is queued or about to be. `may_change`: a second look may still
    come (judging.SECOND_LOOK_AFTER)."""

    state: str
    correct: float | None = None
    verdicts: tuple[VerdictFact, ...] = ()
    overruled: frozenset[str] = field(default_factory=frozenset)
    confirmed: frozenset[str] = field(default_factory=frozenset)
    confirmation_due: bool = False
    may_change: bool = False


def is_inconclusive(v: VerdictFact) -> bool:
    """No verdict of change, yet either the interval lies on one side of zero (the figure did
    move) and reaches past the threshold, or the estimate itself is past the threshold and the
    interval is too wide to tell it from zero (a -50% estimate in [-99%, +30%]): the change may
    or may not be material. An estimate within the threshold, its interval around zero, is no
    evidence of a change: that metric passed."""
    if v.kind != _NO_CHANGE or v.ci_low is None or v.ci_high is None or not v.threshold:
        return False
    if v.ci_low > 0:
        return v.ci_low < v.threshold < v.ci_high
    if v.ci_high < 0:
        return v.ci_low < -v.threshold < v.ci_high
    return v.effect is not None and abs(v.effect) >= v.threshold


def _metric_word(v: VerdictFact, facts: RunFacts) -> str | None:
    if v.metric in facts.confirmed or (v.kind == _REGRESSION and v.metric not in facts.overruled):
        return REGRESSED
    if v.kind == _IMPROVEMENT:
        return IMPROVED
    if v.kind in (_NO_CHANGE, _REGRESSION):  # a regression overruled by its re-run is no change
        return INCONCLUSIVE if is_inconclusive(v) else PASSED
    return None  # not enough data


def run_outcome(facts: RunFacts) -> tuple[str, bool]:
    """(outcome, final): final is False while a confirmation or a second look may change it."""
    if facts.state in _UNFINISHED:
        return PENDING, False
    if facts.state in _DID_NOT_FINISH:
        return FAILED, True
    if facts.correct == 0:
        return INCORRECT, True  # greedy output is deterministic: no re-run changes it
    if facts.confirmation_due:
        return PENDING, False
    words = {_metric_word(v, facts) for v in facts.verdicts} - {None}
    if facts.confirmed:
        words.add(REGRESSED)
    word = next((w for w in _JUDGED_WORST_FIRST if w in words), NOT_JUDGED)
    return word, not facts.may_change


def commit_outcome(outcomes: list[tuple[str, bool]]) -> tuple[str | None, bool]:
    """The worst of a commit's run outcomes (WORST_FIRST), final once every one is; (None,
    False) without runs."""
    if not outcomes:
        return None, False
    words = {word for word, _ in outcomes}
    return next(w for w in WORST_FIRST if w in words), all(final for _, final in outcomes)


def deciding_verdict(facts: RunFacts, word: str, prefer: str = "") -> VerdictFact | None:
    """The verdict that gave a judged run its word (the largest effect among them; `prefer`'s
    metric when it is one of them), for the words that come from verdicts; else None."""
    found = [v for v in facts.verdicts if _metric_word(v, facts) == word]
    if not found:
        return None
    return next((v for v in found if v.metric == prefer), None) or max(found, key=lambda v: abs(v.effect or 0))
