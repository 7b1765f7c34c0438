"""Web-queue messages are checked before anything is stored (a bad one is logged and dropped),
and the optional re-queue of a run whose worker was lost happens once, after which the lost
execution's messages are ignored."""
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import claim, complete, progress, reap, tasks, trigger
from benchsite.bench.lifecycle.messages import MAX_MESSAGE_CHARS
from benchsite.bench.models import Benchmark, Run

pytestmark = pytest.mark.django_db

GOOD = {"measurements": [{"metric": "decode_tok_s", "value": 50.0, "unit": "tok/s", "direction": "higher"}]}


@pytest.fixture
def sent(monkeypatch):
    calls = []

    class Result:
        def __init__(self):
            self.id = f"task-{len(calls)}"

    def send_task(name, args=None, **options):
        calls.append((name, args, options))
        return Result()

    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", send_task)
    return calls


@pytest.fixture
def running(sent, django_capture_on_commit_callbacks):
    benchmark = Benchmark.objects.create(name="m", slug="m", model="/models/m")
    trigger.variant_create(benchmark=benchmark, name="eager")
    with django_capture_on_commit_callbacks(execute=True):
        [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert claim.run_claim(run_id=run.id, task_id="exec-1", worker_host="gpu-1")
    return Run.objects.get(id=run.id)


@pytest.mark.parametrize("args, reason", [
    ((999_999, GOOD), "unknown run 999999"),
    (("1", GOOD), "run id '1' is not an integer"),
    ((None, GOOD), "run id None is not an integer"),
    ("RUN", "measurement 0 value is 'fast', not a finite number"),
    ("NAN", "measurement 0 value is nan, not a finite number"),
    ("LIST", "the result is not an object"),
    ("HUGE", f"(limit {MAX_MESSAGE_CHARS})"),
])
def test_a_bad_result_message_is_logged_and_dropped(running, caplog, args, reason):
    bad_values = {
        "RUN": (running.id, {"measurements": [{"metric": "decode_tok_s", "value": "fast"}]}),
        "NAN": (running.id, {"measurements": [{"metric": "decode_tok_s", "value": float("nan")}]}),
        "LIST": (running.id, ["not", "a", "dict"]),
        "HUGE": (running.id, {"artifacts": [{"kind": "server_log", "name": "x", "content": "x" * (MAX_MESSAGE_CHARS + 1)}]}),
    }
    args = bad_values[args] if isinstance(args, str) else args
    with caplog.at_level(logging.WARNING, logger="benchsite.bench.lifecycle.messages"):
        assert tasks.record_result(*args) is None
    assert reason in caplog.text and "dropped a bad record_result message" in caplog.text
    running.refresh_from_db()
    assert running.state == Run.State.BUILDING and not running.measurements.exists()


def test_bad_progress_and_failure_messages_are_dropped(running, caplog):
    with caplog.at_level(logging.WARNING, logger="benchsite.bench.lifecycle.messages"):
        assert tasks.record_progress(running.id, "x" * 101) is None
        assert tasks.record_progress(running.id, "probing", "SUCCEEDED") is None  # a worker cannot finish a run so
        assert tasks.record_failure(running.id, {"not": "text"}) is None
        assert tasks.record_failure(running.id, "boom", [{"kind": "server_log"}]) is None
        assert tasks.claim_run(running.id, 42, "host") is None
        assert tasks.record_result(running.id) is None  # missing argument
    assert caplog.text.count("dropped a bad") == 6
    running.refresh_from_db()
    assert running.state == Run.State.BUILDING and running.phase == "claimed" and running.error == ""
    assert tasks.record_result(running.id, GOOD, task_id="exec-1") is True  # a good one still lands


def test_the_reaper_requeues_a_lost_run_once_then_fails_it(running, sent, settings, django_capture_on_commit_callbacks):
    settings.BENCH_REAPER_REQUEUE = True
    settings.BENCH_HEARTBEAT_TIMEOUT_S = 60
    Run.objects.filter(id=running.id).update(heartbeat_at=timezone.now() - timedelta(seconds=90))
    with django_capture_on_commit_callbacks(execute=True):
        assert reap.runs_reap_stale() == 1
    run = Run.objects.get(id=running.id)
    assert run.state == Run.State.QUEUED and run.attempts == 2 and run.phase.startswith("re-queued: no heartbeat")
    assert sent[-1][0] == "bench.execute_run" and run.task_id == f"task-{len(sent)}"
    # the lost execution comes back to life: its messages no longer count
    assert claim.run_claim(run_id=run.id, task_id=run.task_id, worker_host="gpu-2")
    assert complete.run_complete(run_id=run.id, result=GOOD, task_id="exec-1") is False
    progress.run_progress(run_id=run.id, phase="from the lost one", task_id="exec-1")
    assert Run.objects.get(id=run.id).phase == "claimed"
    # the second loss fails it, with the reason
    Run.objects.filter(id=run.id).update(heartbeat_at=timezone.now() - timedelta(seconds=90))
    assert reap.runs_reap_stale() == 1
    run = Run.objects.get(id=run.id)
    assert run.state == Run.State.FAILED and "no heartbeat from worker gpu-2" in run.error


def test_the_reaper_judges_only_the_silence_it_could_hear(running, settings):
    """After a gap in its ticks (database or web worker away), heartbeats sent meanwhile still wait
    in the queue: the reaper fails no run until it has listened for a whole timeout again."""
    settings.BENCH_HEARTBEAT_TIMEOUT_S, settings.BENCH_REAPER_INTERVAL_S = 60, 10
    t = timezone.now()
    Run.objects.filter(id=running.id).update(heartbeat_at=t - timedelta(seconds=90))
    for s in (300, 290, 280):
        reap.reaper_listening_since(now=t - timedelta(seconds=s))
    since = reap.reaper_listening_since(now=t)  # 280 s without a tick: the database was down
    assert since == t
    assert reap.runs_reap_stale(now=t, listening_since=since) == 0
    for s in range(10, 61, 10):  # ticking again: the same window holds
        assert reap.reaper_listening_since(now=t + timedelta(seconds=s)) == t
    later = t + timedelta(seconds=61)
    assert reap.runs_reap_stale(now=later, listening_since=reap.reaper_listening_since(now=later)) == 1
    assert Run.objects.get(id=running.id).state == Run.State.FAILED


def test_a_claim_retried_after_no_answer_takes_over_the_late_claim_of_its_own_task(sent, django_capture_on_commit_callbacks):
    """The database was away: attempt 0's claim went unanswered and landed later; the task's retry
    (same task id, attempt 1) takes the run while nothing has started. A second delivery of one
    attempt, or a claim once the run has moved on, still gets False."""
    benchmark = Benchmark.objects.create(name="c", slug="c", model="/models/m")
    trigger.variant_create(benchmark=benchmark, name="eager")
    with django_capture_on_commit_callbacks(execute=True):
        [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert tasks.claim_run(run.id, "exec-1", "gpu-1") is True  # attempt 0's claim, landing late
    assert tasks.claim_run(run.id, "exec-1", "gpu-1") is False  # the same message delivered twice
    assert tasks.claim_run(run.id, "exec-2", "gpu-2", attempt=1) is False  # another task
    assert tasks.claim_run(run.id, "exec-1", "gpu-3", attempt=1) is True  # the retry takes it over
    assert Run.objects.get(id=run.id).worker_host == "gpu-3"
    progress.run_progress(run_id=run.id, phase="starting engine", task_id="exec-1")
    assert tasks.claim_run(run.id, "exec-1", "gpu-4", attempt=2) is False  # it started: no second execution
    assert tasks.claim_run(run.id, "exec-1", "gpu-4", attempt=-1) is None  # a bad message is dropped
