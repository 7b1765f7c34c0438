"""Verdicts against the run-to-run history: known inputs with answers worked out by hand."""
import pytest

from benchsite.bench.lifecycle import complete
from benchsite.bench.models import Run
from benchsite.regressions.models import Threshold, Verdict
from benchsite.regressions.verdicts import judge, verdicts_compute
from runners import contract

from .conftest import add_run

HISTORY = [100.0, 102.0, 98.0, 101.0, 99.0]  # mean 100, sample sd sqrt(2.5) = 1.5811
# Prediction interval half-width: t(0.975, 4) = 2.7764 (t table) * 1.5811 * sqrt(1 + 1/5) = 4.809.


def test_judge_known_answer():
    out = judge(value=94.0, history=HISTORY, direction="higher", threshold=0.03)
    assert out["kind"] == Verdict.Kind.REGRESSION
    assert out["baseline"] == pytest.approx(100.0)
    assert out["effect"] == pytest.approx(-0.06)
    # On the ratio 0.94: 0.94 * exp(-+0.04809) - 1 (the half-width relative to the mean of 100).
    assert out["ci_low"] == pytest.approx(0.94 * 0.953048 - 1, abs=2e-4)
    assert out["ci_high"] == pytest.approx(0.94 * 1.049265 - 1, abs=2e-4)


def test_relative_interval_never_passes_minus_100_percent():
    # A 10x slower run against a noisy history: the plain interval (value - mean +- half) / mean
    # read [-130.6%, -49.2%]; on the ratio it stays above -100% and still holds the effect.
    noisy = [400.0, 300.0, 420.0, 380.0, 500.0, 250.0]
    out = judge(value=40.0, history=noisy, direction="higher", threshold=0.03)
    assert out["kind"] == Verdict.Kind.REGRESSION
    assert -1.0 < out["ci_low"] < out["effect"] < out["ci_high"] < 0
    # A metric whose values change sign (an A/B delta) keeps the plain interval.
    out = judge(value=-0.5, history=[1.0, 1.1, 0.9, 1.0], direction="lower", threshold=0.03)
    assert out["ci_low"] < out["effect"] < out["ci_high"]


def test_judge_needs_significance_and_size():
    # -4%: beyond a 3% threshold but inside the interval (half-width 4.8%): no change.
    assert judge(value=96.0, history=HISTORY, direction="higher", threshold=0.03)["kind"] == Verdict.Kind.NO_CHANGE
    # +6% on a lower-is-better metric is a regression; -6% an improvement.
    assert judge(value=106.0, history=HISTORY, direction="lower", threshold=0.03)["kind"] == Verdict.Kind.REGRESSION
    assert judge(value=94.0, history=HISTORY, direction="lower", threshold=0.03)["kind"] == Verdict.Kind.IMPROVEMENT
    # Significant but below a 10% threshold.
    assert judge(value=94.0, history=HISTORY, direction="higher", threshold=0.10)["kind"] == Verdict.Kind.NO_CHANGE
    # Two runs of history are not enough.
    assert judge(value=50.0, history=HISTORY[:2], direction="higher", threshold=0.03)["kind"] == Verdict.Kind.NOT_ENOUGH_DATA


def test_incorrect_output_is_never_an_improvement():
    out = judge(value=120.0, history=HISTORY, direction="higher", threshold=0.03, incorrect=True)
    assert out["kind"] == Verdict.Kind.NO_CHANGE and "incorrect" in out["note"]


def _verdict(run, metric=contract.DECODE_TOK_S) -> Verdict:
    verdicts_compute(run=run)
    return Verdict.objects.get(run=run, metric=metric)


def test_run_judged_against_its_series(benchmark):
    history = [add_run(benchmark, v) for v in HISTORY]
    run = add_run(benchmark, 94.0)
    verdict = _verdict(run)
    assert verdict.kind == Verdict.Kind.REGRESSION
    assert verdict.effect == pytest.approx(-0.06)
    assert verdict.threshold == pytest.approx(0.03)
    assert verdict.baseline_runs == [r.id for r in history]
    assert "host host-a" in verdict.baseline_description and "pool cpu" in verdict.baseline_description
    assert _verdict(run, contract.CORRECT).kind == Verdict.Kind.NO_CHANGE


def test_incorrect_runs_are_never_baseline(benchmark):
    good = [add_run(benchmark, v) for v in HISTORY]
    add_run(benchmark, 500.0, correct=False)  # wildly fast and wrong: not part of any baseline
    verdict = _verdict(add_run(benchmark, 100.5))
    assert verdict.kind == Verdict.Kind.NO_CHANGE
    assert verdict.baseline_runs == [r.id for r in good]
    assert verdict.baseline == pytest.approx(100.0)


def test_newly_incorrect_fast_run(benchmark):
    for v in HISTORY:
        add_run(benchmark, v)
    run = add_run(benchmark, 130.0, correct=False)
    assert _verdict(run).kind == Verdict.Kind.NO_CHANGE  # +30% but wrong: not an improvement
    correctness = _verdict(run, contract.CORRECT)
    assert correctness.kind == Verdict.Kind.REGRESSION and correctness.note == "newly incorrect output"


def test_flagged_repeats_are_not_samples(benchmark):
    for v in HISTORY:
        add_run(benchmark, v)
    # Two repeats delivered in one burst read 130 tok/s; the one clean repeat reads 94.
    run = add_run(benchmark, 130.0, samples=[94.0, 130.0, 130.0], flags=["", "burst", "burst"])
    verdict = _verdict(run)
    assert verdict.value == pytest.approx(94.0)
    assert verdict.kind == Verdict.Kind.REGRESSION
    every_flagged = add_run(benchmark, 130.0, samples=[130.0, 130.0], flags=["burst", "burst"])
    assert _verdict(every_flagged).kind == Verdict.Kind.NOT_ENOUGH_DATA


def test_other_host_is_not_compared(benchmark):
    for v in HISTORY:
        add_run(benchmark, v, host="host-a")
    verdict = _verdict(add_run(benchmark, 94.0, host="host-b"))
    assert verdict.kind == Verdict.Kind.NOT_ENOUGH_DATA
    assert "host host-b" in verdict.baseline_description


def test_threshold_overrides(benchmark):
    for v in HISTORY:
        add_run(benchmark, v)
    Threshold.objects.create(benchmark=None, metric=contract.DECODE_TOK_S, relative=0.05)
    run = add_run(benchmark, 94.0)
    assert _verdict(run).threshold == pytest.approx(0.05)
    Threshold.objects.create(benchmark=benchmark, metric=contract.DECODE_TOK_S, relative=0.10)
    verdict = _verdict(run)
    assert verdict.threshold == pytest.approx(0.10) and verdict.kind == Verdict.Kind.NO_CHANGE


def test_finished_run_is_judged_through_the_signal(benchmark, django_capture_on_commit_callbacks):
    for v in HISTORY:
        add_run(benchmark, v)
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(), batch=add_run(benchmark, 100.0).batch,
                             state=Run.State.RUNNING, worker_host="host-a", ref="main")
    # Two repeats held back and delivered in one burst (flagged by the decode probe): not samples.
    decode = contract.measurement(contract.DECODE_TOK_S, 130.0, samples=[94.0, 130.0, 130.0])
    decode["sample_flags"] = ["", "burst", "burst"]
    with django_capture_on_commit_callbacks(execute=True):
        assert complete.run_complete(run_id=run.id, result={"measurements": [decode]})
    verdict = Verdict.objects.get(run=run, metric=contract.DECODE_TOK_S)
    assert (verdict.kind, verdict.value) == (Verdict.Kind.REGRESSION, 94.0)


def test_run_page_shows_verdicts(benchmark, client):
    for v in HISTORY:
        add_run(benchmark, v)
    run = add_run(benchmark, 94.0)
    verdicts_compute(run=run)
    html = client.get(f"/runs/{run.id}/").content.decode()
    assert 'data-metric="decode_tok_s" data-kind="regression"' in html
    assert "-6.0%" in html and "±3.0%" in html
