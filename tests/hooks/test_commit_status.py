"""Commit status back to GitHub, played by a local HTTP server: what is said, where, and the
retries of a real web-queue Celery worker. A failure to report never fails the run."""
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench import services
from benchsite.bench.models import Measurement, Run
from benchsite.hooks import status
from benchsite.hooks.models import RepoWatch
from tests.conftest import Workers, _database_url, wait_for

from .conftest import SECRET_ENV, SHA_A, SHA_B, FakeGitHub, make_benchmark

TOKEN = "ghp_test_token"


def make_run(benchmark, *, state="RUNNING", commit=SHA_B, ref="main", trigger="webhook", tok_s=None, hours_ago=0,
             variant="eager"):
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(name=variant), batch=uuid.uuid4(),
                             state=state, trigger=trigger, commit=commit, ref=ref, heartbeat_at=timezone.now())
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


def test_description_gives_tok_s_and_the_change_against_the_branchs_previous_result(watched_benchmark):
    make_run(watched_benchmark, state="SUCCEEDED", commit=SHA_A, tok_s=100.0, hours_ago=2)
    make_run(watched_benchmark, state="SUCCEEDED", commit="d" * 40, ref="perf/x", tok_s=50.0, hours_ago=1)
    make_run(watched_benchmark, state="SUCCEEDED", commit="e" * 40, tok_s=300.0, hours_ago=1, variant="compiled")
    run = make_run(watched_benchmark, state="SUCCEEDED", tok_s=110.0)
    assert status.status_description(run) == ("success", "eager: 110.0 tok/s, +10.0% vs 100.0 at aaaaaaa")


def test_first_result_failed_run_and_incorrect_output(watched_benchmark):
    first = make_run(watched_benchmark, state="SUCCEEDED", tok_s=80.0)
    assert status.status_description(first) == ("success", "eager: 80.0 tok/s, no earlier result on main")
    failed = make_run(watched_benchmark, state="FAILED")
    Run.objects.filter(id=failed.id).update(error="patch does not apply\nhunk 2 rejected")
    failed.refresh_from_db()
    assert status.status_description(failed) == ("failure", "eager: failed: patch does not apply")
    wrong = make_run(watched_benchmark, state="SUCCEEDED", tok_s=500.0)
    Measurement.objects.create(run=wrong, metric="correct", value=0)
    assert status.status_description(wrong) == ("failure", "eager: output incorrect (500.0 tok/s)")


def test_only_runs_of_a_watched_github_repository_at_a_full_sha_get_a_status(watched_benchmark, settings):
    assert status.run_status_target(make_run(watched_benchmark)) == status.StatusTarget("acme", "vllm", SHA_B)
    assert status.run_status_target(make_run(watched_benchmark, trigger="api")) is not None
    assert status.run_status_target(make_run(watched_benchmark, trigger="form")) is None
    assert status.run_status_target(make_run(watched_benchmark, commit="", ref="main")) is None
    unwatched = make_benchmark("tiny-b", "https://github.com/other/vllm.git")
    assert status.run_status_target(make_run(unwatched)) is None
    settings.BENCH_GITHUB_HOSTS = ["github.example.com"]  # e.g. only a GitHub Enterprise host
    assert status.run_status_target(make_run(watched_benchmark)) is None


def test_the_status_posted_to_github(watched_benchmark, github_settings):
    make_run(watched_benchmark, state="SUCCEEDED", commit=SHA_A, tok_s=200.0, hours_ago=1)
    run = make_run(watched_benchmark, state="SUCCEEDED", tok_s=150.0)
    with FakeGitHub() as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        assert status.commit_status_report(run_id=run.id) is True
    [request] = github.requests
    assert request["path"] == f"/api/v3/repos/acme/vllm/statuses/{SHA_B}"
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["json"] == {
        "state": "success",
        "description": "eager: 150.0 tok/s, -25.0% vs 200.0 at aaaaaaa",
        "context": "decode-bench/tiny-a/eager",
        "target_url": f"https://bench.example.org/runs/{run.id}/",
    }


def test_github_refusing_for_good_is_not_retried(watched_benchmark, github_settings):
    run = make_run(watched_benchmark, state="SUCCEEDED", tok_s=150.0)
    with FakeGitHub(script=[422]) as github:
        github_settings.BENCH_GITHUB_API_URL = github.url
        assert status.commit_status_report(run_id=run.id) is False
    assert len(github.requests) == 1


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
    services.run_complete(run_id=run.id, result={"measurements": [
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
    assert github.requests[1]["json"]["description"] == "eager: 123.4 tok/s, no earlier result on main"
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
    from benchsite.bench.signals import run_finished

    run_finished.send(sender=Run, run_id=run.id)
    assert Run.objects.get(id=run.id).state == "SUCCEEDED"
    assert f"could not queue the commit status of run {run.id}" in caplog.text
