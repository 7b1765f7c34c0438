"""The confirmation rule and the noise it is measured in: known answers worked out by hand."""
import math

import pytest

from benchsite.regressions.judging import CONFIRM_FRACTION, CONFIRM_Z, confirmation_agrees, robust_noise


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
