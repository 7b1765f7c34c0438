"""A comparison judged from its runs' results as the worker sends them (recorded: the real tiny
model's greedy output, and the real corrupted one; the real engine's run is
tests/e2e/test_pull_request_engine.py): a harmless head passes, a slower one regresses, a head
whose output is wrong is incorrect whatever its speed, a failed side fails, and the check is
reported at each step."""
import json

import pytest

from benchsite.bench.lifecycle import claim, complete, fail
from benchsite.bench.models import Run
from benchsite.integrations.models import Comparison
from benchsite.integrations.pulls.tasks import REPORT_TASK
from runners import contract
from tests.runners.probes.test_correctness import TINY_CORRUPT, TINY_REF

from .events import HEAD, github_pull_request
from .test_pull_webhooks import deliver  # noqa: F401 (fixture)


def _result(tok_s: float, tokens: list[int]) -> dict:
    return {"measurements": [contract.measurement(contract.DECODE_TOK_S, tok_s, samples=[tok_s * 0.99, tok_s,
                                                                                         tok_s * 1.01])],
            "artifacts": [{"kind": "probe_json", "name": contract.GREEDY_ARTIFACT,
                           "content": json.dumps({"token_ids": tokens})}]}


def _finish(comparison: Comparison, head_tok_s: float, head_tokens: list[int], *, fail_head: bool = False):
    for pull_run in comparison.pull_runs.select_related("run").order_by("run_id"):
        run = pull_run.run
        assert claim.run_claim(run_id=run.id, task_id=f"t{run.id}", worker_host="test-host")
        if pull_run.role == "head" and fail_head:
            fail.run_fail(run_id=run.id, error="engine exited with code 1\nlast lines")
        elif pull_run.role == "head":
            complete.run_complete(run_id=run.id, result=_result(head_tok_s, head_tokens))
        else:
            complete.run_complete(run_id=run.id, result=_result(100.0, TINY_REF))


@pytest.fixture
def opened(watched, deliver, django_capture_on_commit_callbacks):
    watched.pull_requests = {"starts_per_side": 2}
    watched.save()
    assert deliver(github_pull_request("opened")).status_code == 202
    return Comparison.objects.get(benchmark__slug="tiny-a")


def _judged(comparison, django_capture_on_commit_callbacks, **head):
    with django_capture_on_commit_callbacks(execute=True):  # run_finished goes out once committed
        _finish(comparison, **head)
    comparison.refresh_from_db()
    return comparison


def test_a_harmless_head_passes_with_its_table(opened, sent, django_capture_on_commit_callbacks):
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=100.2, head_tokens=TINY_REF)
    assert (comparison.state, comparison.outcome) == ("done", "passed"), comparison.summary
    assert [row["variant"] for row in comparison.table] == ["eager", "compiled"]
    row = comparison.table[0]
    assert row["correctness"] == "identical" and len(row["base_runs"]) == len(row["head_runs"]) == 2
    assert row["base"] == pytest.approx(100.0) and row["head"] == pytest.approx(100.2)
    assert comparison.merge_base == "" or len(comparison.merge_base) == 40
    assert comparison.id in [args[0] for name, args, _ in sent if name == REPORT_TASK]
    # never a commit's outcome nor a branch's history
    assert not Run.objects.filter(trigger="pull").exclude(branch="").exists()


def test_a_slower_head_with_the_same_output_regresses_and_the_table_shows_by_how_much(
        opened, django_capture_on_commit_callbacks):
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=60.0, head_tokens=TINY_REF)
    assert comparison.outcome == "regressed", comparison.summary
    row = comparison.table[0]
    assert row["correctness"] == "identical" and row["effect"] == pytest.approx(-0.4, abs=0.01)
    assert row["ci_low"] <= row["effect"] <= row["ci_high"] < -0.03  # two equal starts a side: no spread
    assert comparison.summary.startswith("eager: decode throughput -40.0% [")


def test_a_head_whose_output_is_wrong_is_incorrect_even_when_faster(opened, django_capture_on_commit_callbacks):
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=130.0, head_tokens=TINY_CORRUPT)
    assert comparison.outcome == "incorrect", comparison.summary
    assert comparison.table[0]["correctness"] == "incorrect" and comparison.table[0]["outcome"] == "incorrect"
    assert comparison.summary.startswith("eager: ")


def test_a_failed_head_fails_the_comparison_with_its_reason(opened, django_capture_on_commit_callbacks):
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=100.0, head_tokens=TINY_REF,
                         fail_head=True)
    assert comparison.outcome == "failed" and "engine exited with code 1" in comparison.summary


def test_a_comparison_is_running_once_its_first_run_starts(opened, sent, django_capture_on_commit_callbacks):
    first = opened.pull_runs.order_by("run_id").first().run
    with django_capture_on_commit_callbacks(execute=True):
        claim.run_claim(run_id=first.id, task_id="t", worker_host="test-host")
    opened.refresh_from_db()
    assert opened.state == "running" and opened.head_sha == HEAD


C16 = "c16-p8192-m256"


def _two_points(tok_s: float, c16_tok_s: float, tokens: list[int]) -> dict:
    result = _result(tok_s, tokens)
    result["measurements"].append({**contract.measurement(contract.DECODE_TOK_S, c16_tok_s, samples=[
        c16_tok_s * 0.99, c16_tok_s, c16_tok_s * 1.01]), "point": C16})
    return result


def test_a_change_at_one_workload_point_is_a_change_with_a_row_of_its_own(watched, deliver,
                                                                            django_capture_on_commit_callbacks):
    watched.pull_requests = {"starts_per_side": 2}
    watched.save()
    benchmark = watched.benchmarks.get(slug="tiny-a")
    benchmark.workloads = [{"max_tokens": benchmark.max_tokens}, {"concurrency": 16, "prompt_tokens": 8192,
                                                                   "max_tokens": 256}]
    benchmark.save()
    assert deliver(github_pull_request("opened")).status_code == 202
    comparison = Comparison.objects.get(benchmark__slug="tiny-a")
    first = benchmark.default_point
    with django_capture_on_commit_callbacks(execute=True):
        for pull_run in comparison.pull_runs.select_related("run").order_by("run_id"):
            run = pull_run.run
            assert claim.run_claim(run_id=run.id, task_id=f"t{run.id}", worker_host="test-host")
            c16 = 30.0 if pull_run.role == "head" else 40.0  # only 16 streams at once got slower
            complete.run_complete(run_id=run.id, result=_two_points(100.0, c16, TINY_REF))
    comparison.refresh_from_db()
    eager = [row for row in comparison.table if row["variant"].startswith("eager")]
    assert [(row["variant"], row["point"]) for row in eager] == [(f"eager · {first}", first), (f"eager · {C16}", C16)]
    assert eager[0]["outcome"] == "passed" and eager[1]["outcome"] == "regressed"
    assert eager[1]["effect"] == pytest.approx(-0.25, abs=0.01)
    assert comparison.outcome == "regressed" and f"eager · {C16}: decode throughput -25.0%" in comparison.summary


def _quiet_series(comparison, relative=0.0008, starts=14):
    """The main line's noise for each variant's series, as SeriesNoise keeps it."""
    from benchsite.regressions.models import SeriesNoise
    from benchsite.regressions.noise import settings_of
    from benchsite.regressions.series import series_key

    for pull_run in comparison.pull_runs.filter(role="base").select_related("run__variant", "run__benchmark"):
        run = pull_run.run
        run.worker_host = "test-host"  # where _finish claims it
        SeriesNoise.objects.get_or_create(series_key=series_key(run), metric=contract.DECODE_TOK_S,
                                          settings=settings_of(run), method="", defaults={
                                              "benchmark": run.benchmark, "variant": run.variant,
                                              "relative": relative, "starts": starts})


def test_with_the_series_noise_known_a_1_percent_slower_head_regresses_by_the_floor(
        opened, django_capture_on_commit_callbacks):
    _quiet_series(opened)
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=99.0, head_tokens=TINY_REF)
    assert comparison.outcome == "regressed", comparison.summary
    row = comparison.table[0]
    assert row["threshold"] == 0.005 and row["effect"] == pytest.approx(-0.01)
    assert -0.013 < row["ci_low"] < row["ci_high"] < -0.007  # pooled: 13 + 2 degrees of freedom, Pocock's level
    assert row["note"] == "intervals pooled with the series' noise between starts (0.08% over 14 starts)"
    decode = next(m for m in row["metrics"] if m["metric"] == contract.DECODE_TOK_S)
    assert decode["noise"] == {"relative": 0.0008, "starts": 14}


def test_without_the_series_noise_the_same_head_passes_under_the_fixed_threshold(
        opened, django_capture_on_commit_callbacks):
    comparison = _judged(opened, django_capture_on_commit_callbacks, head_tok_s=99.0, head_tokens=TINY_REF)
    assert comparison.outcome == "passed", comparison.summary
    assert comparison.table[0]["threshold"] == 0.03 and comparison.table[0]["note"] == ""
