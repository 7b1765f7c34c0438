"""Which pools are served, as real Celery workers report it: a GPU worker started for pool
`cpu` says so on its own heartbeat (bench.record_worker, through Redis to the web worker); pool
`h200x2`, which no worker serves, is named as such on the API and the trigger is refused."""
import json

import pytest

from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, PoolWorker, Run
from benchsite.integrations import tokens
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_real_worker_serves_its_pool_and_not_another(celery_workers, client, django_user_model, settings):
    served = wait_for(lambda: pools.pool_status("cpu")["served"] and pools.pool_status("cpu"), 120,
                      what="the GPU worker's pool heartbeat", explain=celery_workers.tails)
    [worker] = served["workers"]
    assert worker.startswith("gpu@") and served["message"] == f"pool cpu is served by {worker}"
    assert list(PoolWorker.objects.values_list("pool", flat=True)) == ["cpu"]  # not its per-host twin queue
    assert pools.pool_status("h200x2")["message"] == "no worker has ever served pool h200x2: never seen"

    h200 = Benchmark.objects.create(name="H200", slug="h200", model="/models/m", gpu_pool="h200x2")
    trigger.variant_create(benchmark=h200, name="eager")
    _, token = tokens.api_token_create(user=django_user_model.objects.create_user("ci", password="x"),
                                              name="ci")
    refused = client.post("/api/runs/", data=json.dumps({"benchmark": "h200"}), content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {token}")
    assert refused.status_code == 409 and "no worker has ever served pool h200x2" in refused.json()["error"]
    forced = client.post("/api/runs/", data=json.dumps({"benchmark": "h200", "force": True}),
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert forced.status_code == 201
    [queue] = [run["queue"] for run in forced.json()["runs"]]
    assert (queue["position"], queue["served"]) == (1, False)
    assert Run.objects.get().state == Run.State.QUEUED

    # The worker goes away: the pool says since when nobody has served it.
    celery_workers.stop()
    settings.BENCH_WORKER_SEEN_TIMEOUT_S = 1
    gone = wait_for(lambda: not pools.pool_status("cpu")["served"] and pools.pool_status("cpu"), 30,
                    interval_s=0.5, what="the pool to be unserved")
    assert gone["message"].startswith("no worker has served pool cpu since ")
