"""The bisection's binary search on its own: known histories with the answer worked out by hand."""
import pytest

from benchsite.regressions.detect.bisect_search import Decision, bounds, next_step

COMMITS = ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]  # after the good commit; c7 is the bad end


def test_the_first_step_is_the_middle_and_a_tie_takes_the_older():
    assert next_step(COMMITS, {}) == Decision("test", commit="c3")  # open 0..5 around 2.5: c3 (2)
    assert next_step(COMMITS[:4], {}) == Decision("test", commit="c2")  # open 0..2 around 1: c2


def test_good_and_bad_narrow_the_range_down_to_the_first_bad_commit():
    assert bounds(COMMITS, {"c3": "good", "c5": "bad"}) == (2, 4)
    assert next_step(COMMITS, {"c3": "good", "c5": "bad"}) == Decision("test", commit="c4")
    assert next_step(COMMITS, {"c3": "good", "c4": "good", "c5": "bad"}) == Decision("found", commit="c5")


def test_a_skipped_commit_moves_the_step_to_its_neighbour():
    # the middle, 2.5, is c3 (index 2) skipped: c4 (index 3) is nearer it than c2 (index 1)
    assert next_step(COMMITS, {"c3": "skip"}) == Decision("test", commit="c4")


def test_only_skips_left_or_contradicting_outcomes_are_undecidable():
    assert next_step(COMMITS, {"c1": "good", "c2": "skip", "c3": "bad"}) == Decision(
        "undecidable", candidates=("c2", "c3"))
    assert next_step(COMMITS, {"c2": "bad", "c4": "good"}) == Decision(
        "undecidable", candidates=("c2", "c3", "c4"))


def test_no_commit_between_good_and_bad_is_refused():
    with pytest.raises(ValueError, match="no commit"):
        next_step([], {})
