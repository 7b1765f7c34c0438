"""A probe module that lives in the tests only (sample_probe.py) travels through the real service:
the Celery workers this test starts load it through BENCH_PROBE_MODULES, the GPU worker runs it
on the fake engine (a real process, tests/faults/fake_engine.py), its measurement lands on the
run page (labelled from the metric it declares) and in /api/, with no edit to any product file."""
import sys

import pytest
from django.urls import reverse

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, Run
from tests.conftest import Workers, _database_url, wait_for
from tests.faults.harness import FAKE_ENGINE

from .plugin import SAMPLE, sample_probe  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


@pytest.fixture
def plugin_workers(redis_broker, transactional_db, tmp_path):
    """The service's web and GPU workers, both with the plug-in, the GPU one on the fake engine."""
    from django.db import connection

    workers = Workers(redis_broker, _database_url(connection.settings_dict), tmp_path, pool="cpu")
    workers.env.update({"BENCH_PROBE_MODULES": SAMPLE, "BENCH_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}",
                        "BENCH_ENGINE_CPU": "0"})
    workers.start("web", "web")
    workers.start("gpu", "gpu.cpu")
    yield workers
    workers.stop()


def _final(run_id):
    run = Run.objects.get(id=run_id)
    return run if run.is_final else None


def test_a_test_only_probe_reaches_the_run_page_and_the_api(plugin_workers, sample_probe, client):
    benchmark = Benchmark.objects.create(name="plugin", slug="plugin", model="/nonexistent/plugin-model",
                                         gpu_pool="cpu", prompt="hello", max_tokens=4, repeats=1, warmup=0,
                                         startup_timeout_s=90, time_limit_s=180)
    trigger.variant_create(benchmark=benchmark, name="ok", is_reference=True)
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    run = wait_for(lambda: _final(run.id), 180, what="the run with the plug-in probe", explain=plugin_workers.tails)
    assert run.state == Run.State.SUCCEEDED, run.error

    stored = run.measurements.get(metric=sample_probe.HEALTH_MS)
    assert (stored.unit, stored.direction, stored.details) == ("ms", "lower", {"status": 200})
    assert run.artifacts.get(name="sample_health.json").error == ""
    page = client.get(reverse("bench:run", args=[run.id])).content.decode()
    assert "engine health check (sample probe)" in page  # the label the probe declared
    api = client.get(reverse("bench:api-run", args=[run.id])).json()
    health = next(m for m in api["measurements"] if m["metric"] == sample_probe.HEALTH_MS)
    assert (health["unit"], health["direction"], health["value"]) == ("ms", "lower", stored.value)
