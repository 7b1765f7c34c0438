"""A result of several workload points is stored point by point: the first point's figures are
the run's (what verdicts, charts and comparisons read), the others sit beside them; a figure
without a point (an older worker, a point-less probe) is the first point's."""
import pytest

from benchsite.bench.lifecycle import claim, complete, trigger
from benchsite.bench.models import Benchmark, Measurement
from runners.contract import Measurement as Figure

pytestmark = pytest.mark.django_db


@pytest.fixture
def started(monkeypatch):
    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", lambda *a, **k: type("R", (), {"id": "task-1"})())

    def start(**benchmark):
        b = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=64, **benchmark)
        trigger.variant_create(benchmark=b, name="eager", flags=[], env={})
        run = trigger.runs_trigger(benchmark=b, trigger="api", variants=[b.variants.get()])[0]
        claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
        return run
    return start


def _figure(metric, value, point=""):
    return {**Figure.of(metric, value).to_dict(), **({"point": point} if point else {})}


def test_each_point_is_stored_and_the_first_is_the_runs_figure(started):
    run = started(workloads=[{"max_tokens": 64}, {"concurrency": 16, "prompt_tokens": 512, "max_tokens": 64}])
    result = {"measurements": [_figure("decode_tok_s", 50.0, "c1-p0-m64"), _figure("decode_tok_s", 400.0, "c16-p512-m64"),
                               _figure("weight_bytes_per_gpu", 1e9)]}
    assert complete.run_complete(run_id=run.id, result=result)
    assert sorted(Measurement.all_points.filter(run=run).values_list("metric", "point", "first_point", "value")) == [
        ("decode_tok_s", "c1-p0-m64", True, 50.0), ("decode_tok_s", "c16-p512-m64", False, 400.0),
        ("weight_bytes_per_gpu", "c1-p0-m64", True, 1e9)]
    assert run.measurements.get(metric="decode_tok_s").value == 50.0  # one figure per run for older readers


def test_an_older_workers_result_is_the_benchmarks_single_point(started):
    run = started()
    assert complete.run_complete(run_id=run.id, result={"measurements": [_figure("decode_tok_s", 50.0)]})
    assert list(run.measurements.values_list("point", "first_point")) == [("c1-p0-m64", True)]
    # the message delivered again stores nothing twice
    complete.run_complete(run_id=run.id, result={"measurements": [_figure("decode_tok_s", 50.0)]})
    assert Measurement.all_points.filter(run=run).count() == 1


def test_an_export_of_the_runs_api_keeps_each_measurements_point():
    from benchsite.bench.lifecycle.runs_export import _measurement

    exported = {"metric": "decode_tok_s", "value": 400.0, "unit": "tok/s", "direction": "higher", "point": "c16-p0-m64"}
    assert _measurement(exported)["point"] == "c16-p0-m64"
    assert "point" not in _measurement({**exported, "point": None})  # an export from before workload points


def test_points_written_past_the_checks_never_cost_a_result_its_figures(started):
    run = started()
    Benchmark.objects.filter(pk=run.benchmark_id).update(workloads=[{"concurrency": 0, "max_tokens": 8}])
    assert complete.run_complete(run_id=run.id, result={"measurements": [_figure("decode_tok_s", 50.0)]})
    assert list(run.measurements.values_list("point", flat=True)) == ["c1-p0-m64"]
