"""The run page while a run waits and runs: the worker's live log tail (through the web queue's
progress messages, as the GPU worker sends them), a queued run's place in its pool's queue, and
whether any worker serves that pool; the trigger form's confirmation for a pool nobody serves."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import complete, fail, tasks, trigger
from benchsite.bench.models import PoolWorker, Run
from runners.outputs.livelog import MAX_BYTES

from .conftest import add_server_log
from .helpers import hidden_fields

pytestmark = pytest.mark.django_db


def _log_section(page: str) -> str:
    start = page.index('id="run-log"')
    return page[start:page.index("</pre>", start)]


def test_the_workers_live_tail_reaches_the_run_page_and_the_json_as_it_grows(client, history):
    run = history[(3, 1)]  # RUNNING, no server log stored yet
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No server log yet." in page and 'id="run-log" hidden' in page

    tasks.record_progress(run.pk, "starting engine", None, log_tail="--- build log ---\n$ git fetch\nINFO starting")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "INFO starting" in _log_section(page) and 'id="run-log" hidden' not in page
    assert "live from the worker" in page and "No server log yet." not in page
    assert client.get(f"/api/runs/{run.pk}/").json()["log_tail"].endswith("INFO starting")

    tasks.record_progress(run.pk, "starting engine", None, log_tail="$ git fetch\nINFO starting\nINFO loading weights")
    assert client.get(f"/api/runs/{run.pk}/").json()["log_tail"].endswith("INFO loading weights")
    run.refresh_from_db()
    assert run.heartbeat_at is not None and run.phase == "starting engine"


def test_a_plain_heartbeat_keeps_the_tail_and_an_oversized_one_is_dropped(client, history):
    run = history[(3, 1)]
    tasks.record_progress(run.pk, "probing decode", None, log_tail="INFO one")
    tasks.record_progress(run.pk, "probing decode", None)  # a heartbeat without a log
    assert tasks.record_progress(run.pk, "probing decode", None, log_tail="x" * (MAX_BYTES + 1)) is None
    run.refresh_from_db()
    assert run.live_log == "INFO one"


def test_a_failed_run_keeps_its_live_tail_and_a_succeeded_one_shows_its_stored_log(client, history):
    hung, done = history[(3, 1)], Run.objects.create(
        benchmark=history[(3, 1)].benchmark, variant=history[(3, 1)].variant, batch=history[(3, 1)].batch,
        state=Run.State.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now())
    tasks.record_progress(hung.pk, "starting engine", None, log_tail="INFO waiting for the GPUs")
    fail.run_fail(run_id=hung.pk, error="no heartbeat from worker gpu-1 for 300 s during phase 'starting engine'")
    page = client.get(f"/runs/{hung.pk}/").content.decode()
    assert "INFO waiting for the GPUs" in _log_section(page)  # a hung engine start can be diagnosed
    assert "the last tail the worker sent (build and engine)" in page

    tasks.record_progress(done.pk, "probing decode", None, log_tail="INFO live only")
    add_server_log(done, lines=70)
    assert complete.run_complete(run_id=done.pk, result={"measurements": []})
    done.refresh_from_db()
    assert done.live_log == ""  # the stored log replaces it
    assert client.get(f"/api/runs/{done.pk}/").json()["log_tail"].endswith("INFO log line 70")


def _pool_left(pool: str, hours: float = 2) -> None:
    PoolWorker.objects.filter(pool=pool).update(last_seen_at=timezone.now() - timedelta(hours=hours))


def test_a_queued_run_says_its_place_and_that_no_worker_serves_its_pool(client, history, ladder_benchmark):
    first = history[(3, 2)]  # QUEUED on h200x2
    second = trigger.runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API,
                                   variants=[ladder_benchmark.variants.get(position=1)])[0]
    page = re.sub(r"\s+", " ", client.get(f"/runs/{second.pk}/").content.decode())
    assert "position 2 of 2 in pool <code>h200x2</code>'s queue · pool h200x2 is served by gpu@test-host" in page

    _pool_left("h200x2")
    page = re.sub(r"\s+", " ", client.get(f"/runs/{first.pk}/").content.decode())
    assert re.search(r'id="run-queue" class="bad">position 1 of 2 in pool <code>h200x2</code>\'s queue · '
                     r"no worker has served pool h200x2 since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(2 h ago\)", page)
    live = client.get(f"/api/runs/{first.pk}/").json()["queue"]
    assert (live["position"], live["length"], live["served"], live["workers"]) == (1, 2, False, [])
    api = {r["id"]: r["queue"] for r in client.get("/api/runs/", {"state": "QUEUED"}).json()["runs"]}
    assert api[second.pk]["position"] == 2 and api[second.pk]["message"].startswith("no worker has served pool h200x2 since")

    PoolWorker.objects.all().delete()
    assert client.get(f"/api/runs/{first.pk}/").json()["queue"]["message"] == \
        "no worker has ever served pool h200x2: never seen"
    started = history[(3, 1)]  # RUNNING: no longer in the queue
    assert client.get(f"/api/runs/{started.pk}/").json()["queue"] is None
    assert 'id="run-queue"' not in client.get(f"/runs/{started.pk}/").content.decode()


def test_the_review_page_names_the_unserved_pool_and_confirming_needs_queue_anyway(auth_client, ladder_benchmark,
                                                                                    history, queued):
    _pool_left("h200x2", hours=3)
    url = f"/b/{ladder_benchmark.slug}/trigger/"
    review = auth_client.post(url, {"variants": [ladder_benchmark.variants.get(position=1).pk], "step": "review"})
    page = re.sub(r"\s+", " ", review.content.decode())
    assert re.search(r'id="trigger-plan-pool" class="bad"><strong>Pool:</strong> no worker has served pool h200x2 '
                     r"since [^;]+ \(3 h ago\); 1 run already waits in its queue, so these start at position 2\.", page)
    assert '<input type="checkbox" name="force" value="1" required>' in page
    fields = hidden_fields(review.content.decode())

    refused = auth_client.post(url, {**fields, "step": "confirm"})
    assert refused.status_code == 409 and queued == []
    assert "tick “Queue anyway” to queue the runs all the same" in refused.content.decode()
    assert not Run.objects.filter(triggered_by__isnull=False).exists()

    confirmed = auth_client.post(url, {**fields, "force": "1", "step": "confirm"})
    assert confirmed.status_code == 302
    assert Run.objects.get(triggered_by__isnull=False).state == Run.State.QUEUED


def test_the_review_page_of_a_served_pool_asks_for_nothing_more(auth_client, ladder_benchmark, queued):
    url = f"/b/{ladder_benchmark.slug}/trigger/"
    review = auth_client.post(url, {"variants": [ladder_benchmark.variants.get(position=1).pk], "step": "review"})
    page = re.sub(r"\s+", " ", review.content.decode())
    assert "<strong>Pool:</strong> pool h200x2 is served by gpu@test-host; its queue is empty." in page
    assert 'name="force"' not in page
    assert auth_client.post(url, {**hidden_fields(review.content.decode()), "step": "confirm"}).status_code == 302


def test_a_workers_pool_heartbeat_is_recorded_and_a_bad_one_dropped(db):
    tasks.record_worker("gpu@host-a", ["cpu", "h200x2"])
    tasks.record_worker("gpu@host-a", ["cpu"])
    assert sorted(PoolWorker.objects.values_list("pool", "worker")) == [("cpu", "gpu@host-a"), ("h200x2", "gpu@host-a")]
    for bad in (("gpu@host-b", ["GPU POOL"]), ("gpu@host-b", []), ("gpu@host-b", "cpu"), (7, ["cpu"])):
        assert tasks.record_worker(*bad) is None
    assert not PoolWorker.objects.filter(worker="gpu@host-b").exists()
