"""The outcome rules (benchsite/bench/lifecycle/outcome.py), pure: every word a run can get, finality, the
order within a run and across a commit's runs."""
import pytest

from benchsite.bench.lifecycle.outcome import (FAILED, IMPROVED, INCONCLUSIVE, INCORRECT, NOT_JUDGED, PASSED, PENDING, REGRESSED,
                                     WORST_FIRST, RunFacts, VerdictFact, commit_outcome, deciding_verdict,
                                     is_inconclusive, run_outcome)

DECODE, ITL = "decode_tok_s", "itl_ms_p50"


def verdict(kind, effect=0.0, lo=-0.01, hi=0.01, metric=DECODE, threshold=0.03):
    return VerdictFact(metric=metric, kind=kind, effect=effect, ci_low=lo, ci_high=hi, threshold=threshold)


def succeeded(*verdicts, **facts):
    return RunFacts(state="SUCCEEDED", correct=1.0, verdicts=verdicts, **facts)


@pytest.mark.parametrize("state", ["QUEUED", "BUILDING", "RUNNING"])
def test_a_run_not_finished_is_pending_and_not_final(state):
    assert run_outcome(RunFacts(state=state)) == (PENDING, False)


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED"])
def test_a_run_that_did_not_finish_failed_for_good(state):
    assert run_outcome(RunFacts(state=state, correct=0.0)) == (FAILED, True)


def test_incorrect_output_wins_over_everything_and_is_final():
    facts = RunFacts(state="SUCCEEDED", correct=0.0, verdicts=(verdict("improvement", 0.5, 0.4, 0.6),),
                     confirmation_due=True, may_change=True)
    assert run_outcome(facts) == (INCORRECT, True)


def test_a_confirmation_due_makes_a_finished_run_pending():
    assert run_outcome(succeeded(verdict("regression", -0.5, -0.6, -0.4), confirmation_due=True)) == (PENDING, False)


def test_any_regression_wins_over_an_improvement_within_a_run():
    facts = succeeded(verdict("improvement", 0.2, 0.1, 0.3), verdict("regression", 0.2, 0.1, 0.3, metric=ITL))
    assert run_outcome(facts) == (REGRESSED, True)


def test_improved_passed_and_not_judged():
    assert run_outcome(succeeded(verdict("improvement", 0.2, 0.1, 0.3), verdict("no_change"))) == (IMPROVED, True)
    assert run_outcome(succeeded(verdict("no_change"), verdict("not_enough_data", None, None, None, ITL))) == (PASSED, True)
    assert run_outcome(succeeded(verdict("not_enough_data", None, None, None))) == (NOT_JUDGED, True)
    assert run_outcome(succeeded()) == (NOT_JUDGED, True)  # no verdict at all
    assert run_outcome(RunFacts(state="SUCCEEDED")) == (NOT_JUDGED, True)  # correctness not judged either


def test_inconclusive_when_the_interval_straddles_the_threshold_on_one_side_of_zero():
    assert is_inconclusive(verdict("no_change", -0.02, -0.04, -0.005))  # moved, maybe beyond -3%
    assert is_inconclusive(verdict("no_change", 0.02, 0.005, 0.04))
    assert not is_inconclusive(verdict("no_change", -0.01, -0.06, 0.04))  # around zero: no evidence of a change
    assert is_inconclusive(verdict("no_change", -0.5, -0.99, 0.3))  # far past -3%, too noisy to tell from zero
    assert is_inconclusive(verdict("no_change", 0.03, -0.01, 0.07))
    assert not is_inconclusive(verdict("no_change", -0.01, -0.02, -0.005))  # moved, within the threshold
    assert not is_inconclusive(verdict("regression", -0.05, -0.07, -0.01))
    facts = succeeded(verdict("no_change", -0.02, -0.04, -0.005), verdict("improvement", 0.2, 0.1, 0.3, metric=ITL))
    assert run_outcome(facts) == (INCONCLUSIVE, True)  # worse than improved


def test_a_regression_its_re_run_contradicted_no_longer_counts():
    regression = verdict("regression", -0.08, -0.1, -0.06)
    assert run_outcome(succeeded(regression, overruled=frozenset({DECODE}))) == (PASSED, True)
    assert run_outcome(succeeded(regression, overruled=frozenset({DECODE}), may_change=True)) == (PASSED, False)


def test_a_change_confirmed_at_this_run_is_a_regression_even_without_its_verdict():
    assert run_outcome(succeeded(verdict("no_change"), confirmed=frozenset({ITL}))) == (REGRESSED, True)


def test_a_second_look_still_to_come_keeps_the_outcome_open():
    assert run_outcome(succeeded(verdict("no_change"), may_change=True)) == (PASSED, False)


def test_a_commit_takes_the_worst_of_its_runs_in_the_issues_order():
    assert WORST_FIRST == (INCORRECT, REGRESSED, FAILED, PENDING, INCONCLUSIVE, NOT_JUDGED, IMPROVED, PASSED)
    for i, worse in enumerate(WORST_FIRST):
        for better in WORST_FIRST[i:]:
            assert commit_outcome([(better, True), (worse, True)]) == (worse, True)
    assert commit_outcome([(PASSED, True), (PENDING, False)]) == (PENDING, False)
    assert commit_outcome([(REGRESSED, True), (PASSED, False)]) == (REGRESSED, False)  # final once every run is
    assert commit_outcome([]) == (None, False)


def test_the_deciding_verdict_is_the_largest_effect_or_the_preferred_metric():
    small, large = verdict("regression", -0.05, -0.07, -0.04), verdict("regression", 0.5, 0.4, 0.6, metric=ITL)
    facts = succeeded(small, large, verdict("no_change", metric="ttft_ms"))
    assert deciding_verdict(facts, REGRESSED) == large
    assert deciding_verdict(facts, REGRESSED, prefer=DECODE) == small
    assert deciding_verdict(facts, PASSED).metric == "ttft_ms"
    assert deciding_verdict(facts, IMPROVED) is None
