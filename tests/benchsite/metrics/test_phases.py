"""A result's phases as the histogram's four, and the counters the life cycle adds to."""
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.metrics.phases import worker_phases
from runners.contract import JobResult

from .scrape import TOKEN, scrape, value


def test_worker_phases_in_the_histograms_words():
    result = JobResult.from_dict({"build": {"path": "source", "duration_s": 120.5}, "phases": [
        {"phase": "measuring memory bandwidth", "duration_s": 4.0}, {"phase": "starting engine", "duration_s": 30.0},
        {"phase": "probing decode", "duration_s": 10.0}, {"phase": "probing correctness", "duration_s": 5.0},
        {"phase": "stopping engine", "duration_s": 1.0}, {"phase": "odd", "duration_s": "n/a"}]})
    assert worker_phases(result) == {"build": 120.5, "probes": 19.0, "engine_start": 30.0}
    assert worker_phases(JobResult.from_dict({})) == {}


@pytest.mark.django_db
def test_a_finished_run_and_a_reaped_one_are_observed(client, settings, sent, django_capture_on_commit_callbacks):
    from benchsite.bench.lifecycle import claim, complete, reap, trigger
    from benchsite.bench.models import Benchmark, Run

    settings.BENCH_METRICS_TOKEN = TOKEN
    b = Benchmark.objects.create(name="tiny", slug="tiny", model="m", gpu_pool="phase-test")
    trigger.variant_create(benchmark=b, name="a")
    trigger.variant_create(benchmark=b, name="b")
    done, lost = trigger.runs_trigger(benchmark=b, trigger=Run.Trigger.FORM)
    before = scrape(client)
    for run in (done, lost):
        claim.run_claim(run_id=run.id, task_id="t", worker_host="gpu-a")
    with django_capture_on_commit_callbacks(execute=True):
        complete.run_complete(run_id=done.id, result={"measurements": [], "phases": [
            {"phase": "starting engine", "duration_s": 3.0}, {"phase": "probing decode", "duration_s": 2.0}]})
    Run.objects.filter(id=lost.id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert reap.runs_reap_stale() == 1
    after = scrape(client)

    def grew(name, **labels):
        return value(after, name, **labels) - before.get((name, tuple(sorted(labels.items()))), 0)

    assert grew("decode_bench_phase_duration_seconds_count", phase="engine_start", pool="phase-test") == 1
    assert grew("decode_bench_phase_duration_seconds_sum", phase="engine_start", pool="phase-test") == 3.0
    assert grew("decode_bench_phase_duration_seconds_count", phase="storing", pool="phase-test") == 1
    assert grew("decode_bench_runs_reaped_total", action="failed") == 1
