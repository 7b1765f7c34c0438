import pytest

from runners.analysis import stats


def test_median_and_percentiles_interpolate_linearly():
    xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert stats.median(xs) == 5.5
    assert stats.percentile(xs, 0) == 1 and stats.percentile(xs, 100) == 10
    assert stats.percentile(xs, 90) == pytest.approx(9.1)  # numpy.percentile(xs, 90) == 9.1
    assert stats.percentile(xs, 99) == pytest.approx(9.91)
    assert stats.percentiles([5.0]) == {"p50": 5.0, "p90": 5.0, "p99": 5.0}
    assert stats.percentile([3, 1, 2], 50) == 2


def test_median_ci_order_statistics():
    assert stats.median_ci([7.0]) == (7.0, 7.0)
    # too few values for 95 %: the whole range, with its true coverage
    assert stats.median_ci([3, 1, 2]) == (1, 3)
    assert stats.median_ci_coverage(3) == pytest.approx(0.75)
    # n = 10: [x(2), x(9)] covers 97.9 %, [x(3), x(8)] only 89 %
    xs = list(range(1, 11))
    assert stats.median_ci(xs) == (2, 9)
    assert stats.median_ci_coverage(10) == pytest.approx(1 - 2 * 11 / 1024)
    low, high = stats.median_ci(list(range(100)))
    assert low < stats.median(range(100)) < high and high - low < 25


def test_bad_values_raise():
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.percentile([1, 2], 101)
    with pytest.raises(ValueError):
        stats.median([1.0, float("nan")])


def test_median_low_is_an_observed_value():
    assert stats.median_low([9, 6, 9, 9]) == 9
    assert stats.median_low([6, 9]) == 6  # stats.median would say 7.5, a count no step made
    assert isinstance(stats.median_low([1, 2, 3]), int)
    with pytest.raises(ValueError):
        stats.median_low([])


def test_comm_sweep_summary_uses_the_stats_convention():
    """The comm sweep's p90 is stats.percentile's (linear), no longer nearest-rank: 10 known samples."""
    from runners.probes.comm.sweep import _summary
    assert _summary([10, 1, 2, 3, 4, 5, 6, 7, 8, 9]) == {"us": 5.5, "us_min": 1, "us_p90": pytest.approx(9.1)}
