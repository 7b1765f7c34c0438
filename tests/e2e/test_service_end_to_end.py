"""The whole product on real parts: the web form, Redis, two Celery workers, a real
`vllm serve` (the CPU build on the tiny model) and the chart endpoint."""
import os
import signal
import uuid
from pathlib import Path

import pytest

from benchsite.bench import services
from benchsite.bench.models import Benchmark, Run
from tests.conftest import wait_for

pytestmark = [pytest.mark.engine, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_S = 600


@pytest.fixture
def benchmark(tiny_model_dir):
    return Benchmark.objects.create(
        name="tiny e2e",
        slug="tiny-e2e",
        model=str(tiny_model_dir),
        gpu_pool="cpu",
        max_tokens=32,
        repeats=3,
        warmup=1,
        engine_args=["--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"],
        startup_timeout_s=300,
        time_limit_s=900,
    )


def _final(run_id):
    run = Run.objects.get(id=run_id)
    return run if run.is_final else None


def _explain(run, workers) -> str:
    return f"{run.state}: {run.error}\n--- gpu worker log ---\n{workers.log('gpu')[-4000:]}"


def test_a_run_triggered_from_the_form_succeeds_on_the_real_engine(benchmark, celery_workers, client, django_user_model):
    eager = services.variant_create(benchmark=benchmark, name="eager", flags=["--enforce-eager"])
    client.force_login(django_user_model.objects.create_user("alice", password="pw"))

    response = client.post(f"/b/{benchmark.slug}/trigger/", {"variants": [eager.id]})

    assert response.status_code == 302
    run = Run.objects.get()
    assert run.triggered_by.username == "alice" and run.trigger == Run.Trigger.FORM
    run = wait_for(lambda: _final(run.id), RUN_TIMEOUT_S, what="the run to finish")
    assert run.state == Run.State.SUCCEEDED, _explain(run, celery_workers)
    assert run.worker_host and run.started_at <= run.finished_at
    decode = run.measurements.get(metric="decode_tok_s")
    assert decode.value > 0 and len(decode.samples) == 3 and decode.direction == "higher"
    assert run.measurements.get(metric="itl_ms_p50").value > 0
    assert "Application startup complete" in run.artifacts.get(kind="server_log").content

    chart = client.get(f"/api/benchmarks/{benchmark.slug}/chart/").json()
    [series] = chart["variants"]
    assert series["name"] == "eager"
    assert [p["run"] for p in series["points"]] == [run.id]
    assert series["points"][0]["value"] == pytest.approx(decode.value)


def _pids_with_marker(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def test_engine_failures_end_runs_failed_with_the_log_and_the_worker_keeps_going(benchmark, celery_workers):
    marker = f"BENCH_TEST_MARKER_{uuid.uuid4().hex.upper()}"
    services.variant_create(benchmark=benchmark, name="bad flag", flags=["--enforce-eager", "--no-such-flag"])
    services.variant_create(benchmark=benchmark, name="dies mid-run", flags=["--enforce-eager"], env={marker: "1"})
    services.variant_create(benchmark=benchmark, name="healthy", flags=["--enforce-eager"])
    benchmark.max_tokens, benchmark.repeats = 400, 20  # long enough to be killed while probing
    benchmark.save()
    bad, dying, healthy = services.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)

    bad = wait_for(lambda: _final(bad.id), RUN_TIMEOUT_S, what="the bad-flag run")
    assert bad.state == Run.State.FAILED
    assert "starting engine" in bad.error and "--no-such-flag" in bad.error  # the engine's own words

    dying = wait_for(lambda: Run.objects.filter(id=dying.id, phase="probing decode").first() or _final(dying.id),
                     RUN_TIMEOUT_S, interval_s=0.5, what="the second run to start probing")
    assert dying.phase == "probing decode", dying.error
    pids = wait_for(lambda: _pids_with_marker(marker), 30, what="the engine processes")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    dying = wait_for(lambda: _final(dying.id), 120, what="the killed run to fail")
    assert dying.state == Run.State.FAILED
    assert "engine exited" in dying.error and "last engine log lines" in dying.error, dying.error

    healthy = wait_for(lambda: _final(healthy.id), RUN_TIMEOUT_S, what="the run after the failures")
    assert healthy.state == Run.State.SUCCEEDED, _explain(healthy, celery_workers)
    assert celery_workers.alive("gpu") and celery_workers.alive("web")
    assert _pids_with_marker(marker) == []
