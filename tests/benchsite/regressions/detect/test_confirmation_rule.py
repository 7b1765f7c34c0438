"""The confirmation rule and the noise it is measured in: known answers worked out by hand."""
import math

import pytest

from benchsite.regressions.detect.judging import (AGREES, CONFIRM_FRACTION, CONFIRM_Z, DISAGREES, UNDECIDED,
                                                  confirmation_agrees, confirmation_look, robust_noise)


def test_robust_noise_known_answers():
    # Differences all 2: 1.4826 * 2 / sqrt(2) = 2.0967.
    assert robust_noise([100, 102, 100, 102, 100]) == pytest.approx(1.4826 * 2 / math.sqrt(2))
    # A step of 10 moves one difference, not the median (1): the noise stays 1.0484.
    assert robust_noise([100, 101, 100, 101, 110, 111, 110, 111]) == pytest.approx(1.4826 / math.sqrt(2))
    assert robust_noise([100, 101]) is None


def test_rerun_must_clear_a_noise_width_and_a_third_of_the_change():
    assert (CONFIRM_Z, CONFIRM_FRACTION) == (1.0, pytest.approx(1 / 3))
    # 100 -> 94 (down), noise 2: the bar is max(1 * 2, 6 / 3) = 2 below 100, i.e. under 98.
    assert confirmation_agrees(figure=97.9, before=100.0, after=94.0, noise=2.0)
    assert not confirmation_agrees(figure=98.1, before=100.0, after=94.0, noise=2.0)
    assert not confirmation_agrees(figure=103.0, before=100.0, after=94.0, noise=2.0)  # the wrong way
    # One extreme run started it (100 -> 115, up), noise 2: a third of the jump (5) is the bar.
    assert not confirmation_agrees(figure=104.0, before=100.0, after=115.0, noise=2.0)
    assert confirmation_agrees(figure=105.5, before=100.0, after=115.0, noise=2.0)
    # No noise figure (too few runs before): the midpoint.
    assert confirmation_agrees(figure=96.9, before=100.0, after=94.0, noise=None)
    assert not confirmation_agrees(figure=97.1, before=100.0, after=94.0, noise=None)
    assert not confirmation_agrees(figure=100.0, before=100.0, after=100.0, noise=1.0)


def test_re_runs_looked_at_together_agree_disagree_or_ask_for_another():
    look = lambda *figures, noise=2.0: confirmation_look(figures=list(figures), before=100.0, after=94.0, noise=noise)
    # One re-run: the rule above; below the bar (98) agrees, the far edge (figure - 2) short of a
    # third of the change (2 below 100, i.e. figure above 100) disagrees, between asks again.
    assert (look(97.9), look(100.1), look(99.0)) == (AGREES, DISAGREES, UNDECIDED)
    # Two re-runs: a mean of two has noise 2 / sqrt(2) = 1.41; the bar stays max(1.41, 2) = 2.
    assert look(99.0, 96.9) == AGREES                       # mean 97.95
    assert look(99.0, 99.6) == UNDECIDED                    # mean 99.3: far edge 100 - 99.3 + 1.41 > 2
    assert look(99.0, 100.4) == DISAGREES                   # mean 99.7: 0.3 + 1.41 < 2
    assert look(99.0, noise=None) == DISAGREES and look(96.0, noise=None) == AGREES  # the midpoint decides
