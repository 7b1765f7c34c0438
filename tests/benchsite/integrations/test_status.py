"""Commit status back to GitHub, played by a local HTTP server: what is said, where, and the
retries of a real web-queue Celery worker. A failure to report never fails the run."""
import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import cancel, claim, fail, results, trigger
from benchsite.bench.lifecycle.complete import run_complete
from benchsite.bench.models import Measurement, Run
from benchsite.bench.domain.units import change_text, interval_text
from benchsite.integrations.github import statuses as status
from benchsite.regressions.detect.sensitivity import short_percent
from benchsite.integrations.models import RepoWatch
from benchsite.regressions.models import ChangePoint, Verdict
from benchsite.regressions.receivers import judge_when_finished
from tests.conftest import Workers, _database_url, wait_for

from .conftest import SECRET_ENV, SHA_B, SHA_C, FakeGitHub, make_benchmark

TOKEN = "ghp_test_token"


def make_run(benchmark, *, state="RUNNING", commit=SHA_B, ref="main", branch="main", trigger="webhook", tok_s=None,
             hours_ago=0, variant="eager"):
    """A run of a push to BRANCH (the benchmark's main line unless told)."""
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(name=variant), batch=uuid.uuid4(),
                             state=state, trigger=trigger, commit=commit, ref=ref, branch=branch,
                             heartbeat_at=timezone.now())
    Run.objects.filter(id=run.id).update(created_at=timezone.now() - timedelta(hours=hours_ago))
    if tok_s is not None:
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher")
    run.refresh_from_db()
    return run


@pytest.fixture
def watched_benchmark(db):
    benchmark = make_benchmark("tiny-a", "https://github.com/acme/vllm.git")
    watch = RepoWatch.objects.create(repo_url="https://github.com/acme/vllm", branches=["main"], secret_env=SECRET_ENV)
    watch.benchmarks.set([benchmark])
    return benchmark


@pytest.fixture
def github_settings(settings):
    settings.BENCH_GITHUB_TOKEN = TOKEN
    settings.BENCH_PUBLIC_URL = "https://bench.example.org"
    return settings


def _history(benchmark, n=10):
    """Earlier judged results of the eager variant: 100 tok/s give or take 1."""
    for i, tok_s in enumerate([100.0, 101.0, 99.0, 100.5, 99.5] * (n // 5)):
        run = make_run(benchmark, state="SUCCEEDED", commit=f"{i + 1:040x}", tok_s=tok_s, hours_ago=n - i)
        judge_when_finished(sender=Run, run_id=run.id)


def _judged(benchmark, tok_s, *, commit=SHA_B, correct=None):
    run = make_run(benchmark, state="SUCCEEDED", commit=commit, tok_s=tok_s)
    if correct is not None:
        Measurement.objects.create(run=run, metric="correct", value=float(correct),
                                   details={"reason": "candidate output is degenerate (repeat: token 7)"})
    judge_when_finished(sender=Run, run_id=run.id)
    run.refresh_from_db()
    return run


def test_a_threshold_under_1_percent_keeps_its_digits():
    assert [short_percent(t) for t in (0.005, 0.03, 0.0125, 0.287)] == ["0.5%", "3%", "1.2%", "29%"]


def test_description_names_the_verdict_and_its_interval(watched_benchmark, sent, settings):
    settings.BENCH_CONFIRM_REGRESSIONS = False  # confirmed at once: the outcome is final
    _history(watched_benchmark)
    run = _judged(watched_benchmark, 60.0)
    verdict = Verdict.objects.get(run=run, metric="decode_tok_s")
    assert run.outcome == "regressed"
    assert status.status_description(run) == (
        "failure", f"eager: regressed: decode throughput −40.0% {interval_text(verdict.ci_low, verdict.ci_high)}, "
                   f"threshold {short_percent(verdict.threshold)}")
    fine = _judged(watched_benchmark, 100.2, commit=SHA_C)
    verdict = Verdict.objects.get(run=fine, metric="decode_tok_s")
    assert status.status_description(fine) == (
        "success", f"eager: passed: decode throughput {change_text(verdict.effect)} "
                   f"{interval_text(verdict.ci_low, verdict.ci_high)}, threshold {short_percent(verdict.threshold)}")


def test_not_judged_failed_run_and_incorrect_output(watched_benchmark, sent):
    first = _judged(watched_benchmark, 80.0)
    assert status.status_description(first) == ("success", "eager: not judged: 0 baseline runs, 3 needed")
    failed = make_run(watched_benchmark, state="RUNNING")
    fail.run_fail(run_id=failed.id, error="patch does not apply\nhunk 2 rejected")
    failed.refresh_from_db()
    assert status.status_description(failed) == ("failure", "eager: failed: patch does not apply")
    wrong = _judged(watched_benchmark, 500.0, correct=0)
    assert status.status_description(wrong) == (
        "failure", "eager: incorrect: candidate output is degenerate (repeat: token 7)")
    queued = make_run(watched_benchmark, state="QUEUED")
    assert status.status_description(queued) == ("pending", "eager: pending: queued")


def test_only_runs_of_a_watched_github_repository_at_a_full_sha_get_a_status(watched_benchmark, settings):
    assert status.run_status_target(make_run(watched_benchmark)) == status.StatusTarget("acme", "vllm", SHA_B)
    assert status.run_status_target(make_run(watched_benchmark, trigger="api")) is not None
    assert status.run_status_target(make_run(watched_benchmark, trigger="form")) is None
    assert status.run_status_target(make_run(watched_benchmark, commit="", ref="main")) is None
    unwatched = make_benchmark("tiny-b", "https://github.com/other/vllm.git")
    assert status.run_status_target(make_run(unwatched)) is None
    settings.BENCH_GITHUB_HOSTS = ["github.example.com"]  # e.g. only a GitHub Enterprise host
    assert status.run_status_target(make_run(watched_benchmark)) is None


def test_the_status_posted_to_github(watched_benchmark, github_settings, sent):
    run = _judged(watched_benchmark, 150.0)
    with FakeGitHub() as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        assert status.commit_status_report(run_id=run.id) is True
    [request] = github.requests
    assert request["path"] == f"/api/v3/repos/acme/vllm/statuses/{SHA_B}"
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["json"] == {
        "state": "success",
        "description": "eager: not judged: 0 baseline runs, 3 needed",
        "context": "decode-bench/tiny-a/eager",
        "target_url": f"https://bench.example.org/runs/{run.id}/",
    }


def test_statuses_follow_the_outcome_through_the_run_life_cycle(watched_benchmark, github_settings, sent,
                                                                django_capture_on_commit_callbacks):
    """Each finished run's outcome reaches GitHub: failure for an incorrect and for a regressed
    run, pending while the regression's confirmation re-run is due, success for a passed run."""
    _history(watched_benchmark)
    reference = Run.objects.filter(state="SUCCEEDED").order_by("-created_at").first()
    results.artifact_create(run=reference, kind="probe_json", name="greedy.json",
                             content=json.dumps({"token_ids": list(range(100, 140))}))
    sha_wrong, sha_slow, sha_fine = "1" * 40, "2" * 40, "3" * 40
    wrong, slow, fine = (make_run(watched_benchmark, commit=sha) for sha in (sha_wrong, sha_slow, sha_fine))
    with FakeGitHub() as github:
        github_settings.BENCH_GITHUB_API_URL = github.url

        def complete(run, tok_s, **extra):
            del sent[:]
            with django_capture_on_commit_callbacks(execute=True):
                run_complete(run_id=run.id, result={"measurements": [
                    {"metric": "decode_tok_s", "value": tok_s, "unit": "tok/s", "direction": "higher"}], **extra})
            for name, args, _ in sent:  # what the web worker would run
                if name == "hooks.report_commit_status":
                    status.commit_status_report(run_id=args[0])

        complete(wrong, 300.0, artifacts=[
            {"kind": "probe_json", "name": "greedy.json", "content": json.dumps({"token_ids": [7] * 40})}])
        complete(slow, 60.0)
        confirmation = ChangePoint.objects.get(run=slow).confirm_run
        claim.run_claim(run_id=confirmation.id, task_id="t", worker_host="")
        complete(confirmation, 61.0)
        complete(fine, 100.2)
    posted = {}
    for request in github.requests:
        posted.setdefault(request["path"].rsplit("/", 1)[1], []).append(
            (request["json"]["state"], request["json"]["description"].split(":")[1].strip()))
    assert posted[sha_wrong][-1] == ("failure", "incorrect")
    assert posted[sha_slow] == [("pending", "pending"), ("failure", "regressed")]
    assert posted[sha_fine] == [("success", "passed")]
    assert all(r["json"]["context"] == "decode-bench/tiny-a/eager" for r in github.requests)


def test_a_pushed_run_is_pending_at_github_from_its_trigger_and_a_cancelled_one_failed(
        watched_benchmark, github_settings, sent, django_capture_on_commit_callbacks):
    def report():  # what the web worker would run
        for name, args, _ in sent:
            if name == "hooks.report_commit_status":
                status.commit_status_report(run_id=args[0])
        del sent[:]

    with FakeGitHub() as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        with django_capture_on_commit_callbacks(execute=True):
            eager, compiled = trigger.runs_trigger(benchmark=watched_benchmark, trigger=Run.Trigger.WEBHOOK,
                                                    commit=SHA_B, ref="main")
        report()
        with django_capture_on_commit_callbacks(execute=True):
            cancel.run_cancel(run=eager)  # superseded by a newer push
        report()
    assert [(r["json"]["context"].rsplit("/", 1)[1], r["json"]["state"], r["json"]["description"])
            for r in github.requests] == [("eager", "pending", "eager: pending: queued"),
                                          ("compiled", "pending", "compiled: pending: queued"),
                                          ("eager", "failure", "eager: failed: cancelled")]


def test_github_refusing_for_good_is_not_retried(watched_benchmark, github_settings):
    run = make_run(watched_benchmark, state="SUCCEEDED", tok_s=150.0)
    with FakeGitHub(script=[422]) as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        assert status.commit_status_report(run_id=run.id) is False
    assert len(github.requests) == 1


def test_commit_statuses_are_counted_by_result(watched_benchmark, github_settings):
    """decode_bench_commit_statuses: ok, retry (a 5xx, 429 or no answer) and refused (a 4xx)."""
    from benchsite.metrics.instruments import COMMIT_STATUSES

    run = make_run(watched_benchmark, state="SUCCEEDED", tok_s=150.0)
    before = {r: COMMIT_STATUSES.labels(result=r)._value.get() for r in ("ok", "retry", "refused")}
    with FakeGitHub(script=[502, 422, 201]) as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        with pytest.raises(status.TransientStatusError):
            status.commit_status_report(run_id=run.id)
        assert status.commit_status_report(run_id=run.id) is False
        assert status.commit_status_report(run_id=run.id) is True
    github_settings.BENCH_GITHUB_API_URL = "http://127.0.0.1:9"  # nothing listens
    with pytest.raises(status.TransientStatusError):
        status.commit_status_report(run_id=run.id)
    after = {r: COMMIT_STATUSES.labels(result=r)._value.get() - before[r] for r in before}
    assert after == {"ok": 1, "retry": 2, "refused": 1}


# --- through the run life cycle and a real web-queue worker --------------------------------


@pytest.fixture
def web_worker(redis_broker, transactional_db, tmp_path, monkeypatch):
    """Starts a real `web` worker with the given status settings in its environment."""
    from django.db import connection

    started = []

    def start(**env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        workers = Workers(redis_broker, _database_url(connection.settings_dict), tmp_path, pool="cpu")
        workers.start("web", "web")
        started.append(workers)
        return workers

    yield start
    for workers in started:
        workers.stop()


def finish(run, tok_s):
    run_complete(run_id=run.id, result={"measurements": [
        {"metric": "decode_tok_s", "value": tok_s, "unit": "tok/s", "direction": "higher"}]})


def test_a_finished_run_reports_its_status_retrying_after_a_500(web_worker, github_settings, watched_benchmark):
    run = make_run(watched_benchmark)
    with FakeGitHub(script=[500]) as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        workers = web_worker(BENCH_GITHUB_API_URL=github.url, BENCH_GITHUB_TOKEN=TOKEN,
                             BENCH_PUBLIC_URL="https://bench.example.org", BENCH_STATUS_RETRY_BASE_MS="200")
        finish(run, 123.4)
        wait_for(lambda: len(github.requests) >= 2, 90, 0.2, "the status, then its retry",
                 explain=lambda: workers.log("web"))
    assert [r["json"]["state"] for r in github.requests] == ["success", "success"]
    assert github.requests[1]["json"]["description"] == "eager: not judged: 0 baseline runs, 3 needed"
    assert "retry 1" in workers.log("web")
    assert Run.objects.get(id=run.id).state == "SUCCEEDED"


def test_github_down_never_fails_the_run(web_worker, github_settings, watched_benchmark):
    run = make_run(watched_benchmark)
    with FakeGitHub(script=[500, 503, 500]) as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        workers = web_worker(BENCH_GITHUB_API_URL=github.url, BENCH_GITHUB_TOKEN=TOKEN,
                             BENCH_STATUS_RETRY_BASE_MS="100", BENCH_STATUS_MAX_RETRIES="1")
        finish(run, 99.0)
        wait_for(lambda: "gave up after 2 attempts" in workers.log("web"), 90, 0.2, "the worker to give up",
                 explain=lambda: workers.log("web"))
    assert len(github.requests) == 2
    run.refresh_from_db()
    assert (run.state, run.error) == ("SUCCEEDED", "")
    assert workers.alive("web")


def test_a_broker_that_cannot_take_the_status_task_never_fails_the_run(github_settings, watched_benchmark,
                                                                       monkeypatch, caplog):
    from benchsite.celery import app

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(app, "send_task", broker_down)
    run = make_run(watched_benchmark)
    finish(run, 99.0)  # django_db: on_commit callbacks do not run; send the signal as on_commit would
    from benchsite.bench.lifecycle.signals import outcome_changed

    outcome_changed.send(sender=Run, run_id=run.id)
    assert Run.objects.get(id=run.id).state == "SUCCEEDED"
    assert f"could not queue the commit status of run {run.id}" in caplog.text
