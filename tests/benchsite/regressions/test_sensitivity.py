"""The rule from each series' noise (regressions.detect.sensitivity): the noise estimate against the
truth, which bound decides, the fallback with too few starts, explicit thresholds winning, and
the rule in verdicts, change points and a bisection of a small step."""
import random
import re
import statistics

import pytest

from benchsite.bench.definitions.apply import ApplyError, config_apply
from benchsite.bench.models import Benchmark
from benchsite.regressions.detect import sensitivity
from benchsite.regressions.models import SeriesNoise, Threshold, Verdict
from benchsite.regressions.noise import noise_refresh
from benchsite.regressions.thresholds import bound_for, explicit_threshold
from benchsite.regressions.verdicts import verdicts_compute
from runners import contract

from .conftest import add_run
from .test_bisection import git_benchmark  # noqa: F401  (a fixture)

DECODE = contract.DECODE_TOK_S


# --- the noise estimate against the truth ------------------------------------------------------


def _series(rng, noise, n=40, steps=(), outliers=(), outlier=0.9):
    """Level 100, relative noise NOISE; STEPS: (index, relative change) from there on;
    OUTLIERS: indices of single runs OUTLIER times as fast (a host's bad moment)."""
    level, values = 100.0, []
    for i in range(n):
        level *= 1 + dict(steps).get(i, 0.0)
        values.append(level * (1 + noise * rng.gauss(0, 1)) * (outlier if i in outliers else 1.0))
    return [(f"c{i}", v) for i, v in enumerate(values)]


@pytest.mark.parametrize("truth", [0.0008, 0.005, 0.02])
def test_noise_estimate_finds_the_truth_through_steps_and_outliers(truth):
    rng = random.Random(7)
    plain, disturbed = [], []
    for _ in range(200):
        plain.append(sensitivity.noise_estimate(_series(rng, truth)).relative)
        # two steps (25 and 50 noise widths) and three single runs 12 noise widths slow, in 40 runs
        series = _series(rng, truth, steps=[(13, -25 * truth), (27, 50 * truth)], outliers=[5, 20, 33],
                         outlier=1 - 12 * truth)
        disturbed.append(sensitivity.noise_estimate(series).relative)
    assert statistics.median(plain) == pytest.approx(truth, rel=0.10)
    assert statistics.median(disturbed) == pytest.approx(truth, rel=0.15)
    # the plain spread of such a series is many times the noise: what the robust estimate avoids
    values = [v for _, v in _series(random.Random(1), truth, steps=[(13, -25 * truth), (27, 50 * truth)])]
    assert statistics.stdev(values) / statistics.fmean(values) > 5 * truth


def test_noise_estimate_ignores_10_percent_hiccups_on_a_quiet_series():
    rng = random.Random(3)
    found = [sensitivity.noise_estimate(_series(rng, 0.0008, outliers=[4, 17, 30])).relative for _ in range(100)]
    assert statistics.median(found) == pytest.approx(0.0008, rel=0.15)


def test_noise_estimate_pools_runs_of_the_same_commit():
    # a series of one code, each commit measured twice: the same-code spread counts in
    points = [(f"c{i // 2}", v) for i, v in enumerate([100.0, 100.2, 99.9, 100.1, 100.0, 99.8, 100.3, 100.1])]
    noise = sensitivity.noise_estimate(points)
    assert noise.starts == 8 and noise.same_code == 8 and noise.known
    assert 0.0005 < noise.relative < 0.003
    assert sensitivity.noise_estimate([("a", 100.0), ("b", 101.0)]) is None  # too few to say


# --- which bound decides ------------------------------------------------------------------------


def test_the_bound_is_the_floor_on_a_quiet_series_and_k_times_the_noise_on_a_noisy_one():
    quiet, noisy = sensitivity.Noise(0.0008, 14), sensitivity.Noise(0.10, 12)
    floor = sensitivity.bound(DECODE, noise=quiet)
    assert (floor.relative, floor.source) == (0.005, "floor")
    assert floor.describe() == "threshold 0.5% (floor); noise 0.08% over 14 starts"
    scaled = sensitivity.bound(DECODE, noise=noisy)
    assert (scaled.relative, scaled.source) == (pytest.approx(0.15), "noise")
    # each metric's own floor: 2% for TTFT, 5% for ITL p99
    assert sensitivity.bound(contract.TTFT_MS, noise=quiet).relative == 0.02
    assert sensitivity.bound(contract.ITL_MS_P99, noise=quiet).relative == 0.05
    # a metric without a floor keeps its fixed threshold as one: never below what it had
    assert sensitivity.bound(contract.ALLREDUCE_CALLS_PER_STEP, noise=quiet).relative == 0.05


def test_too_few_starts_keep_the_fixed_threshold():
    for noise in (None, sensitivity.Noise(0.0008, 5)):
        bound = sensitivity.bound(DECODE, noise=noise)
        assert (bound.relative, bound.source) == (0.03, "default")
    # never more trigger-happy: the default of a noisy metric is its fixed threshold
    assert sensitivity.bound(contract.ITL_MS_P99, noise=sensitivity.Noise(0.0001, 3)).relative == 0.10


def test_an_explicit_threshold_wins_over_the_rule():
    bound = sensitivity.bound(DECODE, noise=sensitivity.Noise(0.10, 20), explicit=0.01)
    assert (bound.relative, bound.source) == (0.01, "explicit")


def test_a_change_counts_only_when_significant_and_material():
    assert sensitivity.counts(effect=-0.01, ci_low=-0.012, ci_high=-0.008, threshold=0.005)
    assert not sensitivity.counts(effect=-0.01, ci_low=-0.02, ci_high=0.001, threshold=0.005)  # interval holds 0
    assert not sensitivity.counts(effect=-0.004, ci_low=-0.005, ci_high=-0.003, threshold=0.005)  # below the floor


def test_what_a_series_can_see_with_more_starts():
    noise = sensitivity.Noise(0.10, 20)
    two, six = (sensitivity.visible_change(noise, n, 0.15) for n in (2, 6))
    assert two == pytest.approx((1.959964 + 1.644854) * 0.10, rel=1e-6) and six < two
    assert sensitivity.visible_change(sensitivity.Noise(0.0008, 14), 6, 0.005) == 0.005  # the floor


@pytest.mark.parametrize("value", [0, -0.01, 1, 1.5, float("nan"), "0.01", True])
def test_a_floor_outside_0_and_1_is_refused_with_its_name(value):
    with pytest.raises(contract.ContractError, match="the floor of ttft_ms must be a relative change above 0 and below 1"):
        sensitivity.check_floors({contract.TTFT_MS: value})


def test_a_floor_for_no_metric_is_refused():
    with pytest.raises(contract.ContractError, match="'tokens_per_joule' names no judged metric"):
        sensitivity.check_floors({"tokens_per_joule": 0.01})


# --- explicit thresholds in the database and the YAML -----------------------------------------------


def _apply(thresholds):
    return config_apply(data={"benchmarks": [{"slug": "tiny", "name": "tiny", "model": "/models/tiny",
                                              "thresholds": thresholds, "variants": [{"name": "eager"}]}]})


def test_yaml_thresholds_apply_and_an_admin_row_wins(db):
    _apply({DECODE: 0.01, contract.TTFT_MS: 0.04})
    bench = Benchmark.objects.get(slug="tiny")
    assert bench.thresholds == {DECODE: 0.01, contract.TTFT_MS: 0.04}
    assert explicit_threshold(benchmark=bench, metric=DECODE) == 0.01
    assert explicit_threshold(benchmark=bench, metric=contract.ITL_MS_P50) is None
    Threshold.objects.create(benchmark=None, metric=contract.ITL_MS_P50, relative=0.02)
    assert explicit_threshold(benchmark=bench, metric=contract.ITL_MS_P50) == 0.02  # the row for every benchmark
    Threshold.objects.create(benchmark=None, metric=DECODE, relative=0.07)
    assert explicit_threshold(benchmark=bench, metric=DECODE) == 0.01  # the benchmark's YAML before the global row
    Threshold.objects.create(benchmark=bench, metric=DECODE, relative=0.02)
    assert explicit_threshold(benchmark=bench, metric=DECODE) == 0.02  # its own admin row first


@pytest.mark.parametrize("thresholds, message", [
    ({DECODE: 0}, "thresholds: decode_tok_s must be a relative change above 0 and below 1"),
    ({DECODE: 1.0}, "thresholds: decode_tok_s must be a relative change above 0 and below 1"),
    ({DECODE: -0.02}, "thresholds: decode_tok_s must be a relative change above 0 and below 1"),
    ({"tok_s": 0.01}, "thresholds: key 'tok_s' names no judged metric"),
    ({"correct": 0.01}, "thresholds: key 'correct' names no judged metric"),
    ([0.01], "thresholds must be a mapping"),
])
def test_bad_yaml_thresholds_are_refused_with_their_name(db, thresholds, message):
    with pytest.raises(ApplyError, match=message.replace("(", r"\(")):
        _apply(thresholds)
    assert not Benchmark.objects.filter(slug="tiny").exists()  # nothing applied


def test_an_admin_threshold_outside_0_and_1_is_refused(db):
    from django.core.exceptions import ValidationError

    for relative in (0.0, 1.0, -0.1):
        with pytest.raises(ValidationError, match="above 0 and below 1"):
            Threshold(metric=DECODE, relative=relative).full_clean()
    with pytest.raises(ValidationError, match="names no judged metric"):
        Threshold(metric="nope", relative=0.01).full_clean()


# --- the rule in verdicts ---------------------------------------------------------------------


QUIET = [100.0, 100.08, 99.93, 100.05, 99.96, 100.1, 99.9, 100.02]  # about 0.07% noise


def _judged(benchmark, values):
    """Runs of VALUES, each judged and its series' noise refreshed as the pipeline does."""
    runs = []
    for v in values:
        run = add_run(benchmark, v)
        verdicts_compute(run=run)
        noise_refresh(run=run)
        runs.append(run)
    return runs


def test_a_1_percent_slowdown_on_a_quiet_series_is_a_regression_by_the_floor(benchmark):
    _judged(benchmark, QUIET)
    run = _judged(benchmark, [99.0])[0]
    verdict = Verdict.objects.get(run=run, metric=DECODE)
    assert verdict.kind == Verdict.Kind.REGRESSION and verdict.threshold_source == "floor"
    assert verdict.threshold == 0.005 and verdict.noise_starts == 8 and 0.0004 < verdict.noise < 0.0015
    assert re.fullmatch(r"threshold 0\.5% \(floor\); noise 0\.\d+% over 8 starts", verdict.bound.describe())
    # the kept noise: one row for the series, read by pages
    (row,) = SeriesNoise.objects.filter(metric=DECODE)
    assert row.starts == 9 and row.series_key == verdict.series_key


def test_the_run_page_says_which_bound_decided(client, benchmark):
    _judged(benchmark, QUIET)
    run = _judged(benchmark, [99.0])[0]
    page = client.get(f"/runs/{run.id}/").content.decode()
    row = re.search(r'<tr class="verdict[^"]*" data-metric="decode_tok_s".*?</tr>', page, re.S).group(0)
    assert re.search(r'±0\.5% <span class="muted">\(floor\); noise 0\.\d+% over 8 starts</span>', row), row


def test_with_fewer_than_6_starts_the_same_slowdown_waits_for_the_fixed_threshold(benchmark):
    _judged(benchmark, QUIET[:4])
    run = _judged(benchmark, [99.0])[0]
    verdict = Verdict.objects.get(run=run, metric=DECODE)
    assert verdict.kind == Verdict.Kind.NO_CHANGE
    assert (verdict.threshold, verdict.threshold_source, verdict.noise_starts) == (0.03, "default", 4)


def test_an_explicit_threshold_decides_the_verdict(benchmark):
    Threshold.objects.create(benchmark=benchmark, metric=DECODE, relative=0.02)
    _judged(benchmark, QUIET)
    verdict = Verdict.objects.get(run=_judged(benchmark, [99.0])[0], metric=DECODE)
    assert (verdict.kind, verdict.threshold, verdict.threshold_source) == (Verdict.Kind.NO_CHANGE, 0.02, "explicit")


def test_bound_for_reads_the_series_noise(benchmark):
    runs = _judged(benchmark, QUIET)
    bound = bound_for(run=runs[-1], metric=DECODE)
    assert bound.source == "floor" and bound.noise.starts == 8
    # another metric of the run has no kept noise: the fixed threshold
    assert bound_for(run=runs[-1], metric=contract.TTFT_MS).source == "default"


# --- a bisection of a small step ----------------------------------------------------------------


def _small_step_worker(repo, capture, read):
    """Play the GPU worker: each queued run reports READ(run, level), level 100 or 99 (1% slower
    from SLOW_FROM on); returns the runs played."""
    from benchsite.bench.lifecycle import claim, complete
    from benchsite.bench.models import Run

    from .conftest import git

    played = []
    while (run := Run.objects.filter(state=Run.State.QUEUED).order_by("id").first()) is not None:
        assert claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
        level = 99.0 if "EXTRA_WORK = 1" in git(repo["path"], "show", f"{run.commit}:work.py") else 100.0
        value = read(run, level)
        with capture(execute=True):
            complete.run_complete(run_id=run.id, result={"measurements": [
                contract.measurement(DECODE, value, samples=[value] * 3), contract.measurement(contract.CORRECT, 1.0)]})
        played.append(run)
    return played


def _quiet_series(bench, run):
    SeriesNoise.objects.create(benchmark=bench, variant=run.variant, series_key=f"tiny/{run.variant.name}/cpu/host-a",
                               metric=DECODE, relative=0.0008, starts=14)


def test_a_1_percent_step_is_bisected_to_its_commit(git_benchmark, repo, django_capture_on_commit_callbacks):
    from benchsite.regressions.bisection import bisection_for_change

    from .conftest import SLOW_FROM
    from .test_bisection import change_point

    c = repo["commits"]
    cp = change_point(git_benchmark, c[0], c[15], before=100.0, after=99.0)
    _quiet_series(git_benchmark, cp.run)
    bisection = bisection_for_change(change_point=cp)
    rng = random.Random(5)
    _small_step_worker(repo, django_capture_on_commit_callbacks, lambda run, level: level * (1 + 0.0008 * rng.gauss(0, 1)))
    bisection.refresh_from_db()
    assert (bisection.state, bisection.first_bad) == ("found", c[SLOW_FROM])
    assert not bisection.steps.filter(role__in=["good_again", "bad_again"]).exists()  # every step was clear


def test_an_inconclusive_step_re_measures_both_sides_before_it_is_decided(git_benchmark, repo,
                                                                          django_capture_on_commit_callbacks):
    """The host got 0.45% slower after the change was found: the first probe (a good commit) reads
    99.5, as far from the change's good level as from its bad one. It is not flipped like a coin:
    the newest good and oldest bad commit run once more, and against those levels it is good."""
    from benchsite.regressions.bisection import bisection_for_change

    from .conftest import SLOW_FROM
    from .test_bisection import change_point

    c = repo["commits"]
    cp = change_point(git_benchmark, c[0], c[15], before=100.0, after=99.0)
    _quiet_series(git_benchmark, cp.run)
    bisection = bisection_for_change(change_point=cp)
    first = []

    def read(run, level):
        if not first:
            first.append(run)
            return 99.5
        return level * 0.9955

    _small_step_worker(repo, django_capture_on_commit_callbacks, read)
    bisection.refresh_from_db()
    assert (bisection.state, bisection.first_bad) == ("found", c[SLOW_FROM])
    probe = bisection.steps.get(run=first[0])
    assert probe.outcome == "good" and "re-measured sides" in probe.note
    again = {s.role: s for s in probe.rechecks.all()}
    assert set(again) == {"good_again", "bad_again"}
    assert again["good_again"].commit == c[0] and again["bad_again"].commit == c[15]
    assert again["good_again"].value == pytest.approx(99.55) and again["bad_again"].value == pytest.approx(98.5545)


def test_the_benchmark_page_shows_each_variant_s_noise_and_what_it_can_see(client, benchmark):
    page = client.get(f"/b/{benchmark.slug}/").content.decode()
    assert 'id="sensitivity"' in page and "No series has been judged yet." in page
    _judged(benchmark, QUIET + [100.03, 99.97, 100.06, 99.95, 100.0, 100.04])
    page = client.get(f"/b/{benchmark.slug}/").content.decode()
    noise = SeriesNoise.objects.get(metric=DECODE)
    row = re.search(r'<tr data-variant="eager">(.*?)</tr>', page, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    assert cells[1] == f"±{noise.relative * 100:.2f}% between starts, 14 starts"
    assert cells[2] == "0.5% (floor)"
    seen = sensitivity.visible_change(sensitivity.Noise(noise.relative, 14), 2, 0.005)
    assert cells[3] == f"{seen * 100:.2f}%" and cells[4] == "0.50%"
    Threshold.objects.create(benchmark=benchmark, metric=DECODE, relative=0.012)
    page = client.get(f"/b/{benchmark.slug}/").content.decode()
    assert "1.2% <span class=\"muted\">(set for this benchmark)</span>" in page


def test_starts_of_one_commit_beside_the_series_count_as_same_code_evidence(benchmark):
    """A pull-request check's six starts of one base commit make a young series' noise known."""
    from benchsite.bench.models import Run

    for v in (100.0, 100.1, 99.9, 100.05, 99.95, 100.02):
        Run.objects.filter(id=add_run(benchmark, v, commit="b" * 40).id).update(trigger=Run.Trigger.PULL)
    add_run(benchmark, 100.0, commit="a" * 40).delete()  # a deleted run leaves nothing behind
    runs = _judged(benchmark, [100.0, 100.08, 99.94])
    noise = bound_for(run=runs[-1], metric=DECODE).noise
    assert (noise.starts, noise.same_code) == (9, 6) and noise.known
    assert 0.0003 < noise.relative < 0.002
    # the check's runs are no part of the series itself: its verdicts read three runs
    assert len(Verdict.objects.get(run=runs[-1], metric=DECODE).baseline_runs) == 2
