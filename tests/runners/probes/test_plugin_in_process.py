"""The test-only probe module (sample_probe.py), named in BENCH_PROBE_MODULES, goes the whole way in
one process, with no product file changed: loaded at the bench app's start as every Django process
(web side, GPU worker) loads it, run by the runner (run_job, the fake engine of tests/faults), its
result recorded by the web side's task (bench.record_result), then shown on the run page
(labelled from the metric it declares) and in /api/runs/<id>/. test_plugin_end_to_end.py does the
same through real Celery workers."""
import sys

import pytest
from django.apps import apps
from django.test import override_settings
from django.urls import reverse

from benchsite.bench.lifecycle import claim, jobspec, tasks, trigger
from benchsite.bench.models import Benchmark, Run
from benchsite.bench.storage.artifacts import store_all
from runners.contract import ArtifactRef
from runners.job import run_job
from runners.probes import registry
from tests.faults.harness import FAKE_ENGINE

from .plugin import SAMPLE

pytestmark = pytest.mark.django_db


@pytest.fixture
def started_with_plugin(monkeypatch):
    """The bench app started again with BENCH_PROBE_MODULES naming the sample probe (what a worker's
    start does), the runner's environment on the fake engine; the probe removed afterwards."""
    monkeypatch.setenv("BENCH_PROBE_MODULES", SAMPLE)
    monkeypatch.setenv("BENCH_VLLM_COMMAND", f"{sys.executable} {FAKE_ENGINE}")
    monkeypatch.setenv("BENCH_ENGINE_CPU", "0")
    monkeypatch.setenv("BENCH_PROBE_TIMEOUT_S", "5")
    bench = apps.get_app_config("bench")
    with override_settings(BENCH_PROBE_MODULES=[SAMPLE]):
        type(bench)(bench.name, bench.module)
    yield sys.modules[SAMPLE]
    registry.unregister("sample_health")
    sys.modules.pop(SAMPLE, None)


def test_a_plug_in_probe_reaches_the_result_the_run_page_and_the_api(started_with_plugin, tmp_path, client,
                                                                     django_capture_on_commit_callbacks):
    sample = started_with_plugin
    benchmark = Benchmark.objects.create(name="plugin", slug="plugin", model="/nonexistent/plugin-model",
                                         prompt="hello", max_tokens=4, repeats=1, warmup=0)
    trigger.variant_create(benchmark=benchmark, name="ok", is_reference=True)
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert claim.run_claim(run_id=run.id, task_id="exec-plugin", worker_host="gpu-a")

    spec = {**jobspec.run_spec(run), "probes": ["decode", "sample_health"]}  # the two the test needs
    result = run_job(spec, work_dir=tmp_path / "work")
    health = result.measurement(sample.HEALTH_MS)
    assert (health.unit, health.direction, health.details) == ("ms", "lower", {"status": 200})
    result.artifacts = [ArtifactRef.from_dict(a) for a in store_all(run.id, [a.to_dict() for a in result.artifacts])]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(run.id, result.to_dict(), task_id="exec-plugin") is True

    run.refresh_from_db()
    assert run.state == Run.State.SUCCEEDED, run.error
    stored = run.measurements.get(metric=sample.HEALTH_MS)
    assert (stored.unit, stored.direction, stored.value) == ("ms", "lower", health.value)
    assert run.artifacts.get(name="sample_health.json").error == ""
    page = client.get(reverse("bench:run", args=[run.id])).content.decode()
    assert "engine health check (sample probe)" in page  # the label the probe declared
    api = client.get(reverse("bench:api-run", args=[run.id])).json()
    shown = next(m for m in api["measurements"] if m["metric"] == sample.HEALTH_MS)
    assert (shown["unit"], shown["direction"], shown["value"]) == ("ms", "lower", health.value)
