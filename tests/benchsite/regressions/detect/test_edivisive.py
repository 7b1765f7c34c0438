"""The detector on series with known answers: steps where they were put, spikes and noise not."""
import pytest

from benchsite.regressions.detect.edivisive import detect
from benchsite.regressions.detect.tstats import t_quantile, t_sf_two_sided, t_test_p

# Fixed wobble (no random generator): +-1% around the level, repeating every 5 points.
WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def level(value, n, start=0):
    return [value * (1 + WOBBLE[(start + i) % 5] / 100) for i in range(n)]


def test_t_distribution_known_values():
    assert t_sf_two_sided(2.228, 10) == pytest.approx(0.05, abs=2e-4)  # t table: t(0.975, 10) = 2.228
    assert t_sf_two_sided(0.0, 5) == pytest.approx(1.0)
    assert t_quantile(0.975, 4) == pytest.approx(2.776, abs=1e-3)
    assert t_quantile(0.995, 20) == pytest.approx(2.845, abs=1e-3)
    # Student's t-test on [1,2,3] vs [4,5,6]: t = -3.674, df 4 -> p = 0.02131.
    assert t_test_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.02131, abs=1e-4)


def test_one_step_found_at_its_index():
    series = level(100, 20) + level(94, 10, start=20)
    (cp,) = detect(series)
    assert cp.index == 20
    assert cp.before == pytest.approx(100 * (1 + sum(WOBBLE) / 500), rel=1e-3)
    assert cp.change == pytest.approx(-0.06, abs=0.003)


def test_several_steps():
    series = level(100, 15) + level(110, 15, 15) + level(104, 15, 30)
    assert [cp.index for cp in detect(series)] == [15, 30]


def test_spike_is_not_a_change():
    assert detect(level(100, 20) + [140] + level(100, 20, 21)) == []
    assert detect(level(100, 20) + [140] + level(100, 10, 21) + [60] + level(100, 10, 32)) == []
    assert detect(level(100, 20) + [140] + level(100, 2, 21)) == []  # a spike near the end


def test_noise_alone_has_no_change():
    assert detect(level(100, 200)) == []


def test_large_step_does_not_hide_a_later_small_one():
    series = level(100, 20) + level(60, 20, 20) + level(63, 20, 40)  # -40%, then +5%
    assert [cp.index for cp in detect(series)] == [20, 40]


def test_min_change_drops_small_significant_steps():
    series = level(100, 20) + level(97, 20, 20)
    assert [cp.index for cp in detect(series)] == [20]
    assert detect(series, min_change=0.04) == []


def test_deterministic():
    series = level(100, 30) + level(95, 30, 30) + level(97, 30, 60)
    assert detect(series) == detect(list(series))


def test_bad_input():
    with pytest.raises(ValueError, match="finite"):
        detect([1.0, float("nan"), 2.0, 3.0, 4.0, 5.0])
    with pytest.raises(ValueError, match="min_size"):
        detect([1.0] * 10, min_size=1)
    assert detect([1.0, 2.0]) == []
