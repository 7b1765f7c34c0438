"""A check adds one engine start a side while it cannot decide, on the same host, up to its cap;
it stops as soon as the answer is clear; the cap and the starts used show in the check run, the
API and the page; settings that cannot work are refused. The runs' results are the worker's
shape (test_results._result); the real engine's check is tests/e2e/test_pull_request_engine.py."""
import math
import random

import pytest

from benchsite.bench.definitions.apply import ApplyError, config_apply
from benchsite.bench.lifecycle import claim, complete
from benchsite.integrations.models import Comparison
from benchsite.integrations.pulls.comparison import headline_check
from benchsite.integrations.github.checks import check_run_payload
from benchsite.integrations.pulls.settings import pull_settings
from benchsite.integrations.pulls.tasks import REPORT_TASK
from benchsite.regressions.detect.sensitivity import Noise, bound
from benchsite.regressions.detect.sequential import look_quantile, looks, pocock_constant
from tests.runners.probes.test_correctness import TINY_REF

from .events import github_pull_request
from .test_pull_webhooks import deliver  # noqa: F401 (fixture)
from .test_results import _quiet_series, _result

NOISY_BASE = [100.0, 104.0, 98.0, 102.0, 99.0, 103.0, 101.0, 97.0]  # about 2.5% between starts


def _open(watched, deliver, **pull_requests) -> Comparison:
    watched.pull_requests = {"starts_per_side": 2, **pull_requests}
    watched.save()
    assert deliver(github_pull_request("opened")).status_code == 202
    return Comparison.objects.get(benchmark__slug="tiny-a")


def _finish_queued(comparison: Comparison, captured, head_factor: float) -> Comparison:
    """The worker finishes every queued run of the comparison: the base side's figure of round r
    is NOISY_BASE[r - 1], the head's that times HEAD_FACTOR (the same noise: a paired drift)."""
    with captured(execute=True):
        for pull_run in comparison.pull_runs.select_related("run").filter(run__state="QUEUED").order_by("run_id"):
            run, figure = pull_run.run, NOISY_BASE[pull_run.round - 1]
            assert claim.run_claim(run_id=run.id, task_id=f"t{run.id}", worker_host="test-host")
            if pull_run.role == "head":
                figure = NOISY_BASE[(pull_run.round + 3) % len(NOISY_BASE)] * head_factor  # its own start's noise
            complete.run_complete(run_id=run.id, result=_result(figure, TINY_REF))
    comparison.refresh_from_db()
    return comparison


def test_an_undecided_check_adds_a_start_a_side_on_the_same_host_until_a_10_percent_slowdown_is_clear(
        watched, deliver, sent, django_capture_on_commit_callbacks):
    comparison = _open(watched, deliver)
    assert (comparison.starts_per_side, comparison.max_starts_per_side, comparison.rounds) == (2, 6, 2)
    first_queues = {o.get("queue") for name, args, o in sent if name == "bench.execute_run"}
    seen = []
    while comparison.state != "done":
        sent.clear()
        comparison = _finish_queued(comparison, django_capture_on_commit_callbacks, head_factor=0.9)
        seen.append((comparison.state, comparison.rounds))
        if comparison.state == "running":  # one more start a side: base and head of each variant
            assert "adding start" in comparison.summary and "of up to 6 a side" in comparison.summary
            queued = [(args[0], o.get("queue")) for name, args, o in sent if name == "bench.execute_run"]
            assert len(queued) == 4 and {q for _, q in queued} == first_queues
            assert comparison.id in [args[0] for name, args, _ in sent if name == REPORT_TASK]
            assert "running" in check_run_payload(comparison)["output"]["summary"]
    assert seen[0] == ("running", 3), seen  # two starts a side could not tell
    assert comparison.outcome == "regressed" and 3 <= comparison.rounds < 6, (seen, comparison.summary)
    row = comparison.table[0]
    assert row["starts"] == {"base": comparison.rounds, "head": comparison.rounds} and row["decided"]
    assert row["level"] == pytest.approx(2 * look_quantile(2, 6) - 1)
    summary = check_run_payload(comparison)["output"]["summary"]
    assert f"{comparison.rounds} engine starts a side (began with 2; up to 6 while undecided)" in summary
    assert "Pocock" in summary


def test_a_clear_answer_stops_at_the_first_look(watched, deliver, sent, django_capture_on_commit_callbacks):
    """With the series' noise known (2.5% over 14 starts) a halved head is clear at two starts a
    side. (Without it Welch's interval of two starts has about 2 degrees of freedom: at Pocock's
    level even -50% takes a third start.)"""
    comparison = _open(watched, deliver)
    _quiet_series(comparison, relative=0.025, starts=14)
    comparison = _finish_queued(comparison, django_capture_on_commit_callbacks, head_factor=0.5)
    assert (comparison.state, comparison.outcome, comparison.rounds) == ("done", "regressed", 2)
    assert comparison.pull_runs.count() == 2 * 2 * 2  # two variants, two sides, two starts: none added


def test_at_its_cap_a_check_reports_and_says_what_it_could_not_see(
        watched, deliver, client, django_capture_on_commit_callbacks):
    comparison = _open(watched, deliver, max_starts_per_side=3)
    while comparison.state != "done":
        comparison = _finish_queued(comparison, django_capture_on_commit_callbacks, head_factor=0.995)
    assert comparison.rounds == 3 and comparison.outcome in ("passed", "inconclusive"), comparison.summary
    row = comparison.table[0]
    assert not row["decided"] and row["starts"] == {"base": 3, "head": 3}
    assert abs(row["effect"]) < row["visible_at_cap"]
    summary = check_run_payload(comparison)["output"]["summary"]
    assert "is below what this check can see" in summary and "with 3 starts a side" in summary
    data = client.get("/api/pulls/github.com/vllm-project/vllm/12/").json()
    [api] = [c for c in data["comparisons"] if c["benchmark"] == "tiny-a"]
    assert (api["starts_per_side"], api["max_starts_per_side"], api["starts_used"]) == (2, 3, {"base": 3, "head": 3})
    page = client.get("/pr/github.com/vllm-project/vllm/12/").content.decode()
    assert "3 engine starts a side (began with 2; up to 3 while undecided)" in page
    assert "is below what this check can see" in page


def test_the_benchmark_s_cap_wins_and_one_below_the_watch_s_starts_is_refused(
        watched, deliver, django_capture_on_commit_callbacks):
    tiny_a = watched.benchmarks.get(slug="tiny-a")
    tiny_a.max_starts_per_side = 4
    tiny_a.save()
    assert _open(watched, deliver).max_starts_per_side == 4
    tiny_a.max_starts_per_side = 1
    tiny_a.save()
    response = deliver(github_pull_request("synchronize", head="b" * 40))
    assert "skipped tiny-a: the benchmark's max_starts_per_side 1 is below pull_requests.starts_per_side 2" in \
        response.json()["detail"], response.json()
    assert not Comparison.objects.filter(benchmark__slug="tiny-a", head_sha="b" * 40).exists()
    assert Comparison.objects.filter(benchmark__slug="tiny-b", head_sha="b" * 40).exists()  # lost nothing else


@pytest.mark.parametrize("value, message", [
    ({"starts_per_side": 4, "max_starts_per_side": 3},
     "pull_requests.max_starts_per_side 3 is below pull_requests.starts_per_side 4"),
    ({"max_starts_per_side": 21}, "must be a whole number from 1 to 20"),
    ({"max_starts_per_side": "6"}, "must be a whole number from 1 to 20"),
])
def test_watch_settings_that_cannot_work_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        pull_settings(value)


def test_defaults_and_what_a_watch_may_set():
    assert pull_settings({}).cap() == 6 and pull_settings({"starts_per_side": 8}).cap() == 8
    assert pull_settings({"max_starts_per_side": 20}).cap() == 20 and pull_settings({}).cap(3) == 3


def test_applying_a_benchmark_cap_below_a_watch_s_starts_is_refused(watched):
    watched.pull_requests = {"starts_per_side": 3}
    watched.save()
    engine = {"repo": watched.benchmarks.get(slug="tiny-a").engine_source.repo_url}
    with pytest.raises(ApplyError, match="max_starts_per_side 2 is below pull_requests.starts_per_side 3"):
        config_apply(data={"benchmarks": [{"slug": "tiny-a", "engine": engine, "max_starts_per_side": 2}]})
    with pytest.raises(ApplyError, match="max_starts_per_side"):
        config_apply(data={"benchmarks": [{"slug": "tiny-a", "engine": engine, "max_starts_per_side": 21}]})
    config_apply(data={"benchmarks": [{"slug": "tiny-a", "engine": engine, "max_starts_per_side": 3}]})
    assert watched.benchmarks.get(slug="tiny-a").max_starts_per_side == 3


# --- the rule, pure ---------------------------------------------------------------------------


def test_pocock_constants_match_the_published_ones_for_equally_spaced_looks():
    for looks_, c in ((2, 2.178), (3, 2.289), (5, 2.413), (10, 2.555)):  # Jennison & Turnbull, Table 2.1
        assert pocock_constant(tuple(range(1, looks_ + 1)), 0.05) == pytest.approx(c, abs=0.001)
    assert looks(2, 6) == (2, 3, 4, 5, 6) and looks(1, 3) == (2, 3) and looks(1, 1) == (1,)


def _simulated(trials: int, *, sd: float, slowdown: float, noise_known: bool, seed: int, cap: int = 6):
    rng = random.Random(seed)
    noise = Noise(sd, 20) if noise_known else None
    threshold = bound("decode_tok_s", noise=noise).relative
    words, starts = [], []
    for _ in range(trials):
        base = [100 * math.exp(rng.gauss(0, sd)) for _ in range(cap)]
        head = [100 * (1 - slowdown) * math.exp(rng.gauss(0, sd)) for _ in range(cap)]
        change, used = headline_check(base, head, first=2, cap=cap, threshold=threshold, noise=noise)
        words.append(change["word"])
        starts.append(used)
    return words, starts


@pytest.mark.parametrize("sd, noise_known", [(0.02, True), (0.02, False), (0.03, True), (0.0008, True)])
def test_simulated_same_code_checks_with_looks_alarm_at_most_one_and_a_half_percent(sd, noise_known):
    words, starts = _simulated(2000, sd=sd, slowdown=0.0, noise_known=noise_known, seed=7)
    alarms = sum(w in ("regressed", "improved") for w in words)
    assert alarms / 2000 <= 0.015, (alarms, sum(starts) / 2000)


def test_simulated_checks_stop_early_when_the_answer_is_clear():
    words, starts = _simulated(500, sd=0.0008, slowdown=0.01, noise_known=True, seed=3)
    assert words.count("regressed") == 500 and set(starts) == {2}  # 1% at 0.08% noise: the first look
    words, starts = _simulated(500, sd=0.02, slowdown=0.10, noise_known=True, seed=4)
    assert words.count("regressed") >= 495 and sum(starts) / 500 < 2.5
