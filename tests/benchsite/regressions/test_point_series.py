"""Each workload point is a series of its own: a slowdown at concurrency 16 is a change of that
point's series (its key ends in the point's id), judged against that point's history; the first
point keeps the key every run had before workload points."""
import pytest

from benchsite.bench.models import Measurement
from benchsite.regressions.models import ChangePoint, Verdict
from benchsite.regressions.pipeline import run_judge
from benchsite.regressions.series import series_key, series_points
from runners import contract

from .conftest import add_run, sha

WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]
C16 = "c16-p8192-m256"


def feed(benchmark, first, at16):
    """One judged run per pair of levels: the first point's figure and C16's."""
    runs = []
    for i, (one, sixteen) in enumerate(zip(first, at16)):
        wobble = 1 + WOBBLE[i % 5] / 100
        run = add_run(benchmark, one * wobble, commit=sha(i + 1))
        Measurement.all_points.create(run=run, metric=contract.DECODE_TOK_S, point=C16, first_point=False,
                                      value=sixteen * wobble, unit="tok/s", direction="higher",
                                      samples=[sixteen * wobble] * 3, sample_flags=[""] * 3)
        run_judge(run_id=run.id)
        runs.append(run)
    return runs


def test_the_first_point_keeps_its_key_and_another_point_has_its_own(benchmark):
    run = add_run(benchmark, 100.0)
    assert series_key(run) == "tiny/eager/cpu/host-a"
    assert series_key(run, C16) == f"tiny/eager/cpu/host-a/{C16}"


def test_a_change_at_concurrency_16_is_a_change_of_that_points_series(benchmark):
    runs = feed(benchmark, [100.0] * 20, [1600.0] * 12 + [1400.0] * 8)
    (cp,) = ChangePoint.objects.filter(metric=contract.DECODE_TOK_S)
    assert (cp.point, cp.series_key, cp.run) == (C16, f"tiny/eager/cpu/host-a/{C16}", runs[12])
    assert cp.is_regression and cp.change == pytest.approx(-0.125, abs=0.01)
    [first, at16] = Verdict.objects.filter(run=runs[13], metric=contract.DECODE_TOK_S).order_by("point")
    assert (first.point, first.kind) == ("", Verdict.Kind.NO_CHANGE)
    assert (at16.point, at16.series_key) == (C16, cp.series_key)
    assert at16.value == pytest.approx(1400.0 * (1 + WOBBLE[3] / 100))
    assert [p.value for p in series_points(run=runs[2], metric=contract.DECODE_TOK_S, point=C16)][0] == 1600.0
    assert [p.value for p in series_points(run=runs[2], metric=contract.DECODE_TOK_S)][0] == 100.0


def test_correctness_is_judged_once_at_the_first_point(benchmark):
    run = feed(benchmark, [100.0] * 2, [1600.0] * 2)[-1]
    assert list(Verdict.objects.filter(run=run, metric=contract.CORRECT).values_list("point", flat=True)) == [""]
