"""Head against base, pure: the interval on the ratio scale, the word per variant, the outcome."""
import math

import pytest

from benchsite.integrations.pulls.comparison import Side, comparison_outcome, ratio_change, variant_row

THRESHOLDS = {"decode_tok_s": 0.03, "itl_ms_p50": 0.03}


def side(run_id, tok_s, *, samples=None, host="2x H200", state="SUCCEEDED", share=None, error=""):
    figures = {"decode_tok_s": tok_s, "itl_ms_p50": 1000 / tok_s} if tok_s else {}
    return Side(run_id=run_id, state=state, error=error, host=host, figures=figures, share=share,
                samples={"decode_tok_s": samples or [tok_s], "itl_ms_p50": [1000 / s for s in samples or [tok_s]]}
                if tok_s else {})


def test_the_interval_is_on_the_ratio_scale_and_never_below_minus_100_percent():
    change = ratio_change([100.0, 102.0, 98.0], [10.0, 30.0, 2.0])
    assert change.ci_low > -1 and change.ci_low < change.effect < change.ci_high
    same = ratio_change([100.0, 100.0], [100.0, 100.0])
    assert (same.effect, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    assert ratio_change([100.0], [90.0]).ci_low is None  # one value a side: no interval


def test_a_slower_head_regresses_and_the_row_has_every_column():
    row = variant_row("eager", [side(1, 100.0, share=0.42), side(3, 101.0, share=0.40)],
                      [side(2, 60.0, share=0.30), side(4, 61.0, share=0.31)], THRESHOLDS, ("identical", "same ids"))
    assert row["outcome"] == "regressed"
    assert row["base"] == pytest.approx(100.5) and row["head"] == pytest.approx(60.5)
    assert row["ci_low"] < row["effect"] < row["ci_high"] < -0.03
    assert (row["share_base"], row["share_head"]) == (pytest.approx(0.41), pytest.approx(0.305))
    assert row["base_runs"] == [1, 3] and row["head_runs"] == [2, 4]
    assert {m["metric"]: m["word"] for m in row["metrics"]} == {"decode_tok_s": "regressed", "itl_ms_p50": "regressed"}
    word, summary = comparison_outcome([row])
    assert word == "regressed" and summary.startswith("eager: decode throughput -39.")


def test_within_noise_passes_and_beyond_threshold_on_one_side_is_inconclusive():
    passed = variant_row("eager", [side(1, 100.0), side(3, 101.0)], [side(2, 100.5), side(4, 100.2)], THRESHOLDS,
                         ("identical", ""))
    assert passed["outcome"] == "passed"
    unsure = variant_row("eager", [side(1, 100.0), side(3, 104.0)], [side(2, 97.0), side(4, 99.5)], THRESHOLDS,
                         ("identical", ""))
    assert unsure["outcome"] in ("inconclusive", "passed")
    assert comparison_outcome([passed, unsure])[0] == unsure["outcome"]


def test_incorrect_output_and_failed_runs_and_machines_that_differ():
    incorrect = variant_row("eager", [side(1, 100.0), side(3, 100.0)], [side(2, 130.0), side(4, 131.0)], THRESHOLDS,
                            ("incorrect", "token 7 is 64 of the last 64 tokens"))
    assert incorrect["outcome"] == "incorrect" and incorrect["note"] == "token 7 is 64 of the last 64 tokens"
    failed = variant_row("eager", [side(1, 100.0)], [side(2, None, state="FAILED", error="engine exited\nmore")],
                         THRESHOLDS, ("not judged", "no greedy output from the head side"))
    assert failed["outcome"] == "failed" and failed["note"] == "head run #2 failed: engine exited"
    apart = variant_row("eager", [side(1, 100.0), side(3, 100.0, host="1x H100")], [side(2, 100.0), side(4, 100.0)],
                        THRESHOLDS, ("identical", ""))
    assert apart["outcome"] == "inconclusive" and "2 different machines" in apart["note"]
    assert comparison_outcome([apart, failed, incorrect])[0] == "incorrect"


def test_one_start_a_side_uses_the_repeats_and_says_so_and_missing_data_never_passes():
    row = variant_row("eager", [side(1, 100.0, samples=[99.0, 100.0, 101.0])],
                      [side(2, 50.0, samples=[49.0, 50.0, 51.0])], THRESHOLDS, ("identical", ""))
    assert row["outcome"] == "regressed" and "repeats" in row["note"]
    single = variant_row("eager", [side(1, 100.0)], [side(2, 100.0)], THRESHOLDS, ("identical", ""))
    assert single["outcome"] == "inconclusive"
    nothing = variant_row("eager", [side(1, None)], [side(2, None)], THRESHOLDS, ("not judged", "no output"))
    assert nothing["outcome"] == "not_judged"
    assert comparison_outcome([])[0] == "not_judged"


def test_a_slowdown_too_noisy_to_tell_from_zero_is_inconclusive_never_passed():
    # one start a side under load: the head's repeats are far slower, the base's spread wide
    row = variant_row("eager", [side(1, 120.0, samples=[40.0, 125.0, 300.0])],
                      [side(2, 60.0, samples=[20.0, 60.0, 140.0])], THRESHOLDS, ("identical", ""))
    decode = {m["metric"]: m for m in row["metrics"]}["decode_tok_s"]
    assert decode["effect"] < -0.2 and decode["ci_low"] < 0 < decode["ci_high"]
    assert decode["word"] == "inconclusive" and row["outcome"] == "inconclusive"


def test_the_series_noise_pools_into_the_interval_of_engine_starts():
    from benchsite.regressions.detect.sensitivity import Noise

    base, head = [217.0, 217.4], [215.0, 215.1]
    welch, pooled = ratio_change(base, head), ratio_change(base, head, Noise(0.0008, 14))
    assert welch.effect == pooled.effect
    assert welch.ci_low < pooled.ci_low < pooled.effect < pooled.ci_high < welch.ci_high
    # 13 degrees of freedom from the series, 2 from the sides: t(0.975, 15) = 2.131
    squares = 0.5 * (math.log(217.4 / 217.0) ** 2 + math.log(215.1 / 215.0) ** 2)
    se = math.sqrt((13 * 0.0008 ** 2 + squares) / 15)
    assert math.log(1 + pooled.ci_high) - math.log(1 + pooled.effect) == pytest.approx(2.131 * se, rel=1e-3)
    # a noise from fewer than 6 starts is not pooled
    assert ratio_change(base, head, Noise(0.0008, 5)) == welch
