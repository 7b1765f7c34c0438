"""The worker's messages on the web side (lifecycle/messages.py, tasks.py): what the GPU worker's
Reporter sends lands through the web tasks, an older worker's forms still land, and a bad message
is logged and dropped with the field named."""
import logging

import pytest
from django.conf import settings

from benchsite.bench.lifecycle import claim, tasks, trigger
from benchsite.bench.models import Benchmark, Build, Run
from benchsite.bench.worker.gpu_worker import Reporter
from runners.contract import CLAIM_RUN, RECORD_FAILURE, RECORD_PROGRESS, RECORD_RESULT, RECORD_WORKER
from runners.messages import WORKER_STATES

pytestmark = pytest.mark.django_db

SHA = "b" * 40
WEB_TASKS = {CLAIM_RUN: tasks.claim_run, RECORD_PROGRESS: tasks.record_progress, RECORD_RESULT: tasks.record_result,
             RECORD_FAILURE: tasks.record_failure, RECORD_WORKER: tasks.record_worker}


class InProcessBroker:
    """Delivers what a GPU worker sends straight to the web task of that name, as JSON would carry it."""

    def __init__(self):
        self.replies = []

    def send_task(self, name, args=None, kwargs=None, **options):
        assert options["queue"] == settings.BENCH_WEB_QUEUE
        self.replies.append(WEB_TASKS[name](*args, **kwargs))


@pytest.fixture
def running(sent):
    benchmark = Benchmark.objects.create(name="m", slug="m", model="/models/m")
    trigger.variant_create(benchmark=benchmark, name="eager")
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert claim.run_claim(run_id=run.id, task_id="exec-1", worker_host="gpu-1")
    return Run.objects.get(id=run.id)


def test_the_states_a_worker_may_set_are_the_active_ones():
    assert set(WORKER_STATES) == set(Run.ACTIVE_STATES)


def test_the_gpu_workers_messages_land_through_the_web_tasks(running):
    broker = InProcessBroker()
    reporter = Reporter(broker, running.id, "exec-1")
    reporter.progress("probing decode", "RUNNING")
    reporter.live.build_lines.append("$ git fetch")
    assert reporter.send_log()
    running.refresh_from_db()
    assert (running.state, running.phase, running.live_log) == (Run.State.RUNNING, "probing decode", "$ git fetch")
    assert reporter.fail("x" * 300_000, [], "engine", {"commit": SHA, "path": "source"}) == "failed"
    running.refresh_from_db()
    assert running.state == Run.State.FAILED and running.failure_kind == "engine" and len(running.error) == 200_000
    assert Build.objects.get().commit == SHA
    assert broker.replies == [None, None, True]


def test_an_older_workers_forms_still_land(running):
    assert tasks.record_progress(running.id, "probing decode") is None  # no state, no task id
    assert Run.objects.get(id=running.id).phase == "probing decode"
    # the build by position, as workers sent it before it went by name
    assert tasks.record_failure(running.id, "boom", [], "build", {"commit": SHA}, "exec-1") is True
    running.refresh_from_db()
    assert running.state == Run.State.FAILED and running.failure_kind == "build" and running.error == "boom"
    assert Build.objects.get().commit == SHA


def test_a_bad_message_is_dropped_naming_the_field(running, caplog):
    with caplog.at_level(logging.WARNING, logger="benchsite.bench.lifecycle.messages"):
        assert tasks.claim_run(running.id, 42, "host") is None
        assert tasks.record_progress(running.id, "probing", "SUCCEEDED") is None
        assert tasks.record_failure(999_999, "boom") is None
        assert tasks.record_worker("gpu@b", ["GPU POOL"]) is None
    assert "dropped a bad claim_run message: bench.claim_run: task id 42 is not a string" in caplog.text
    assert "state 'SUCCEEDED' is not 'BUILDING' or 'RUNNING'" in caplog.text
    assert "dropped a bad record_failure message: unknown run 999999" in caplog.text
    assert "pools[0] 'GPU POOL'" in caplog.text
    running.refresh_from_db()
    assert running.state == Run.State.BUILDING and running.phase == "claimed"
