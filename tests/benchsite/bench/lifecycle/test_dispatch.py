"""Who goes first on a pool: push, form and API runs; then confirmations; then bisections and
canaries. The web side holds the lower ones QUEUED and unsent until their pool has nothing above
them, then sends one at a time (the broker has no strict priority between messages)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.worker import broker
from benchsite.bench.lifecycle import cancel, claim, complete, dispatch, reap, requeue
from benchsite.bench.lifecycle.trigger import runs_trigger, variant_create
from benchsite.bench.models import Benchmark, Run

pytestmark = pytest.mark.django_db
CONFIRM, BACKGROUND = Run.Priority.CONFIRM, Run.Priority.BACKGROUND


@pytest.fixture
def benchmark():
    b = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny")
    variant_create(benchmark=b, name="eager", flags=["--enforce-eager"])
    return b


def trigger(benchmark, priority=Run.Priority.FIRST, **kwargs) -> Run:
    trigger = Run.Trigger.WEBHOOK if priority == Run.Priority.FIRST else Run.Trigger.SCHEDULE
    (run,) = runs_trigger(benchmark=benchmark, trigger=trigger, variants=[benchmark.variants.get()],
                                   priority=priority, **kwargs)
    return run


def sent_ids(sent) -> list[int]:
    return [args[0] for name, args, _ in sent if name == "bench.execute_run"]


def finish(run, capture):
    run.refresh_from_db()
    if run.state == Run.State.QUEUED:
        assert claim.run_claim(run_id=run.id, task_id=run.task_id or "t", worker_host="host-a")
    with capture(execute=True):
        assert complete.run_complete(run_id=run.id, result={"measurements": []})


def test_a_confirmation_waits_for_the_pushes_of_its_pool_and_goes_when_they_are_done(
        benchmark, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        push = trigger(benchmark)
        confirmation = trigger(benchmark, CONFIRM)
    assert sent_ids(sent) == [push.id]
    confirmation.refresh_from_db()
    assert (confirmation.state, confirmation.task_id, confirmation.sent_at) == (Run.State.QUEUED, "", None)
    assert confirmation.phase == "held: pushes of pool cpu go first"

    other_pool = Benchmark.objects.create(name="big", slug="big", model="/models/big", gpu_pool="h200x2")
    variant_create(benchmark=other_pool, name="eager")
    with capture(execute=True):
        elsewhere = trigger(other_pool, BACKGROUND)  # its pool is idle: sent at once
    assert sent_ids(sent) == [push.id, elsewhere.id]

    assert claim.run_claim(run_id=push.id, task_id="t", worker_host="host-a")
    assert dispatch.runs_release(pool="cpu") is None  # running is not done: a push now would wait behind it
    with capture(execute=True):
        later_push = trigger(benchmark)
    finish(push, capture)
    assert sent_ids(sent) == [push.id, elsewhere.id, later_push.id]  # the later push goes first
    finish(later_push, capture)
    assert sent_ids(sent)[-1] == confirmation.id
    confirmation.refresh_from_db()
    assert confirmation.sent_at is not None and confirmation.phase == ""
    assert sent[-1][2]["task_id"] == confirmation.task_id != ""  # given before sending: released once
    assert sent[-1][2]["queue"] == "gpu.cpu"


def test_confirmations_go_before_bisections_one_held_run_at_a_time(benchmark, sent, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    with capture(execute=True):
        push = trigger(benchmark)
        bisection_step = trigger(benchmark, BACKGROUND)  # older, but below a confirmation
        first = trigger(benchmark, CONFIRM, queue="gpu.cpu.host.gpu-b")  # to another host of the pool
        second = trigger(benchmark, CONFIRM)
    finish(push, capture)
    assert sent_ids(sent) == [push.id, first.id]
    assert sent[-1][2]["queue"] == "gpu.cpu.host.gpu-b"
    with capture(execute=True):
        assert dispatch.runs_release(pool="cpu") is None  # one held run under way at a time
    finish(first, capture)
    assert sent_ids(sent)[-1] == second.id
    with capture(execute=True):
        assert cancel.run_cancel(run=Run.objects.get(id=second.id))  # cancelled: the next one goes
    assert sent_ids(sent) == [push.id, first.id, second.id, bisection_step.id]


def test_a_held_run_that_could_not_be_sent_is_held_again(benchmark, sent, monkeypatch,
                                                         django_capture_on_commit_callbacks):
    from benchsite.celery import app

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(app, "send_task", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        confirmation = trigger(benchmark, CONFIRM)
    confirmation.refresh_from_db()
    assert (confirmation.state, confirmation.task_id, confirmation.sent_at) == (Run.State.QUEUED, "", None)


def test_the_beat_never_resends_a_held_run_as_lost_and_releases_what_a_lost_release_left(
        benchmark, sent, monkeypatch, settings, django_capture_on_commit_callbacks):
    """Redis says no message is live; held runs are not lost, they have none yet. A release that
    never happened (a web worker gone between commit and callback) is made up by the beat."""
    monkeypatch.setattr(broker, "live_task_ids", lambda url, queues: set())
    long_ago = timezone.now() - timedelta(seconds=settings.BENCH_REQUEUE_LOST_AFTER_S + 60)
    push, confirmation = trigger(benchmark), trigger(benchmark, CONFIRM)  # no on_commit: nothing sent
    Run.objects.update(created_at=long_ago)
    assert requeue.runs_requeue_lost() == 1  # the push's message, never sent
    assert sent_ids(sent) == [push.id]
    assert claim.run_claim(run_id=push.id, task_id="task-1", worker_host="host-a")
    complete.run_complete(run_id=push.id, result={"measurements": []})  # its on_commit release is lost
    assert sent_ids(sent) == [push.id]
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue.runs_requeue_lost() == 0
    assert sent_ids(sent) == [push.id, confirmation.id]


def test_a_sent_confirmation_whose_host_never_took_it_goes_to_the_pool_queue(benchmark, sent, monkeypatch, settings,
                                                                           django_capture_on_commit_callbacks):
    monkeypatch.setattr(broker, "live_task_ids", lambda url, queues: set())  # host queues are not read
    with django_capture_on_commit_callbacks(execute=True):
        confirmation = trigger(benchmark, CONFIRM, queue="gpu.cpu.host.gpu-b")
    assert sent[-1][2]["queue"] == "gpu.cpu.host.gpu-b"
    Run.objects.update(created_at=timezone.now() - timedelta(days=1))  # held long before it was sent
    assert requeue.runs_requeue_lost() == 0  # judged from when it was sent: seconds ago
    Run.objects.update(sent_at=timezone.now() - timedelta(seconds=settings.BENCH_REQUEUE_LOST_AFTER_S + 60))
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue.runs_requeue_lost() == 1
    assert sent_ids(sent) == [confirmation.id, confirmation.id]
    assert sent[-1][2]["queue"] == "gpu.cpu"


def test_a_held_run_whose_worker_was_lost_is_held_again_and_goes_in_its_turn(benchmark, sent, settings,
                                                                              django_capture_on_commit_callbacks):
    settings.BENCH_REAPER_REQUEUE = True
    settings.BENCH_HEARTBEAT_TIMEOUT_S = 60
    with django_capture_on_commit_callbacks(execute=True):
        confirmation = trigger(benchmark, CONFIRM)
    confirmation.refresh_from_db()
    assert claim.run_claim(run_id=confirmation.id, task_id=confirmation.task_id, worker_host="host-a")
    with django_capture_on_commit_callbacks(execute=True):
        push = trigger(benchmark)  # came while it ran
    Run.objects.filter(id=confirmation.id).update(heartbeat_at=timezone.now() - timedelta(seconds=90))
    with django_capture_on_commit_callbacks(execute=True):
        assert reap.runs_reap_stale() == 1
    confirmation.refresh_from_db()
    assert (confirmation.state, confirmation.attempts, confirmation.sent_at) == (Run.State.QUEUED, 2, None)
    assert sent_ids(sent) == [confirmation.id, push.id]
    finish(push, django_capture_on_commit_callbacks)
    assert sent_ids(sent) == [confirmation.id, push.id, confirmation.id]
