"""The run life cycle (benchsite/bench/lifecycle): trigger, claim, progress, results, failure, reaping, cancel."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import cancel, claim, complete, fail, progress, reap, trigger
from benchsite.bench.models import Benchmark, Measurement, Run, Variant

pytestmark = pytest.mark.django_db


@pytest.fixture
def benchmark():
    b = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=16, repeats=2)
    trigger.variant_create(benchmark=b, name="eager", flags=["--enforce-eager"])
    trigger.variant_create(benchmark=b, name="compiled", env={"VLLM_X": "1"})
    return b


def test_trigger_creates_one_queued_run_per_variant_and_enqueues_on_commit(
    benchmark, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        runs = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM)
        assert sent == []  # nothing leaves before the transaction commits
    assert [r.variant.name for r in runs] == ["eager", "compiled"]
    assert {r.state for r in runs} == {Run.State.QUEUED}
    assert len({r.batch for r in runs}) == 1
    assert [name for name, _, _ in sent] == ["bench.execute_run", "bench.execute_run"]
    name, (run_id, spec), options = sent[0]
    assert options["queue"] == "gpu.cpu"
    assert options["soft_time_limit"] == benchmark.time_limit_s
    assert options["time_limit"] > options["soft_time_limit"]
    assert spec["engine_args"] == ["--enforce-eager"]
    assert spec["model"] == "/models/tiny"
    assert Run.objects.get(id=run_id).task_id == "task-1"
    assert sent[1][1][1]["engine_env"] == {"VLLM_X": "1"}


def test_trigger_refuses_foreign_variants_and_empty_ladders(benchmark, sent):
    other = Benchmark.objects.create(name="other", slug="other", model="m")
    stranger = trigger.variant_create(benchmark=other, name="x")
    with pytest.raises(trigger.TriggerError, match="do not belong"):
        trigger.runs_trigger(benchmark=benchmark, trigger="form", variants=[stranger])
    empty = Benchmark.objects.create(name="empty", slug="empty", model="m")
    with pytest.raises(trigger.TriggerError, match="no variants"):
        trigger.runs_trigger(benchmark=empty, trigger="form")
    assert Run.objects.count() == 0


def _queued(benchmark):
    return trigger.runs_trigger(benchmark=benchmark, trigger="api", variants=[benchmark.variants.first()])[0]


def test_claim_is_conditional(benchmark, sent):
    run = _queued(benchmark)
    assert claim.run_claim(run_id=run.id, task_id="t1", worker_host="gpu-a") is True
    assert claim.run_claim(run_id=run.id, task_id="t2", worker_host="gpu-b") is False
    run.refresh_from_db()
    assert (run.state, run.worker_host, run.task_id) == (Run.State.BUILDING, "gpu-a", "t1")
    assert run.started_at and run.heartbeat_at


def test_a_cancelled_run_cannot_be_claimed(benchmark, sent):
    run = _queued(benchmark)
    assert cancel.run_cancel(run=run)
    assert run.state == Run.State.CANCELLED
    assert claim.run_claim(run_id=run.id, task_id="t", worker_host="h") is False


def test_progress_moves_phase_and_heartbeat_but_never_revives_a_final_run(benchmark, sent):
    run = _queued(benchmark)
    claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
    progress.run_progress(run_id=run.id, phase="starting engine", state="RUNNING")
    run.refresh_from_db()
    assert (run.state, run.phase) == (Run.State.RUNNING, "starting engine")
    fail.run_fail(run_id=run.id, error="boom")
    progress.run_progress(run_id=run.id, phase="late heartbeat", state="RUNNING")
    run.refresh_from_db()
    assert (run.state, run.phase) == (Run.State.FAILED, "starting engine")
    with pytest.raises(ValueError):
        progress.run_progress(run_id=run.id, phase="x", state="SUCCEEDED")


def test_complete_stores_measurements_and_artifacts(benchmark, sent):
    run = _queued(benchmark)
    claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
    result = {
        "measurements": [
            {"metric": "decode_tok_s", "value": 250.0, "unit": "tok/s", "direction": "higher",
             "samples": [240.0, 250.0, 260.0], "ci_low": 240.0, "ci_high": 260.0, "details": {"output_digest": "ab"}},
        ],
        "artifacts": [{"kind": "server_log", "name": "vllm-serve.log", "content": "INFO ready"}],
    }
    assert complete.run_complete(run_id=run.id, result=result)
    run.refresh_from_db()
    assert run.state == Run.State.SUCCEEDED and run.finished_at
    m = run.measurements.get()
    assert (m.metric, m.value, m.samples, m.ci_low, m.direction) == ("decode_tok_s", 250.0, [240.0, 250.0, 260.0], 240.0, "higher")
    assert run.artifacts.get().read_text() == "INFO ready"
    # A duplicate delivery of the same result changes nothing.
    assert complete.run_complete(run_id=run.id, result=result) is False
    assert Measurement.objects.count() == 1


def test_reaper_fails_runs_whose_heartbeat_stopped(benchmark, sent, settings):
    settings.BENCH_HEARTBEAT_TIMEOUT_S = 60
    stale, fresh = _queued(benchmark), _queued(benchmark)
    for run in (stale, fresh):
        claim.run_claim(run_id=run.id, task_id="t", worker_host="gpu-7")
    Run.objects.filter(id=stale.id).update(heartbeat_at=timezone.now() - timedelta(seconds=120), phase="probing decode")
    assert reap.runs_reap_stale() == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.state == Run.State.FAILED
    assert "no heartbeat from worker gpu-7" in stale.error and "probing decode" in stale.error
    assert fresh.state == Run.State.BUILDING


def _finish(run, token_ids, top):
    """Complete RUN as a worker would, with a greedy output whose top-2 logprobs are TOP."""
    claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
    greedy = {"token_ids": token_ids,
              "logprobs": [{f"token_id:{t}": 0.0, f"token_id:{alt}": -gap} for t, (alt, gap) in zip(token_ids, top)]}
    complete.run_complete(run_id=run.id, result={
        "measurements": [{"metric": "decode_tok_s", "value": 100.0, "unit": "tok/s", "direction": "higher"}],
        "artifacts": [{"kind": "probe_json", "name": "greedy.json", "content": json.dumps(greedy)}],
    })
    return run.measurements.get(metric="correct")


def test_correctness_is_judged_against_the_reference_of_the_batch(benchmark, sent):
    eager, compiled = benchmark.variants.all()
    Variant.objects.filter(id=eager.id).update(is_reference=True)
    ids = list(range(100, 140))
    clear = [(1, 5.0)] * 40
    ref_run, same_run = trigger.runs_trigger(benchmark=benchmark, trigger="api")
    baseline = _finish(ref_run, ids, clear)
    assert baseline.value == 1.0 and baseline.details["verdict"] == "baseline"
    same = _finish(same_run, ids, clear)
    assert same.value == 1.0 and same.details["verdict"] == "identical"
    assert same.details["reference_run"] == ref_run.id

    ref2, garbage_run = trigger.runs_trigger(benchmark=benchmark, trigger="api")
    # The candidate finishes first (another GPU worker): judged against the last reference...
    garbage = _finish(garbage_run, [7] * 40, [(8, 5.0)] * 40)
    assert garbage.value == 0.0 and garbage.details["verdict"] == "incorrect"
    assert garbage.details["reference_run"] == ref_run.id
    # ...and judged again once its own batch's reference is there.
    _finish(ref2, ids, clear)
    garbage.refresh_from_db()
    assert garbage.details["reference_run"] == ref2.id and garbage.value == 0.0


def test_comm_ab_between_ladder_steps_that_differ_only_in_a_comm_setting(benchmark, sent):
    graphs = trigger.variant_create(benchmark=benchmark, name="graphs nccl", flags=["--disable-custom-all-reduce"])
    ll = trigger.variant_create(benchmark=benchmark, name="graphs LL", flags=["--disable-custom-all-reduce"],
                                 env={"NCCL_PROTO": "LL"})
    runs = trigger.runs_trigger(benchmark=benchmark, trigger="api", variants=[graphs, ll])
    # The seed: 47.3 tok/s without LL, 57.6 with; profiler shares of the allreduce time.
    for run, tok_s, share in zip(runs, (47.3, 57.6), (0.60, 0.55)):
        claim.run_claim(run_id=run.id, task_id="t", worker_host="h")
        complete.run_complete(run_id=run.id, result={"measurements": [
            {"metric": "decode_tok_s", "value": tok_s}, {"metric": "allreduce_share", "value": share},
            {"metric": "allreduce_calls_per_step", "value": 156},
        ]})
    ab = runs[1].measurements.get(metric="ab_allreduce_ms_delta")
    assert ab.value == pytest.approx(1000 / 57.6 - 1000 / 47.3)  # -3.78 ms per token
    assert ab.details["differs_in"] == ["NCCL_PROTO=LL"] and ab.details["against_run"] == runs[0].id
    assert ab.details["us_per_call_delta"] == pytest.approx(ab.value * 1000 / 156)
    # profiler: 0.55 * 17.36 - 0.60 * 21.14 = -3.14 ms: within tolerance of the A/B -3.78 ms
    assert ab.details["profiler_delta_ms"] == pytest.approx(0.55 * 1000 / 57.6 - 0.60 * 1000 / 47.3)
    assert ab.details["disagree"] is False
    # The eager step differs in --enforce-eager: no A/B against it.
    assert not runs[0].measurements.filter(metric="ab_allreduce_ms_delta").exists()
