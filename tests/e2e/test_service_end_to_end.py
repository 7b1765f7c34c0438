"""The whole product on real parts: Redis, two Celery workers, a real `vllm serve` (the CPU
build on the tiny model), the web form and the chart endpoint.

One test, in the order a worker meets them: an engine that refuses its flags, an engine killed
while it is being probed, then a run triggered from the web form, which must succeed on the
same worker after both failures. Three engine starts (one of them fails at once)."""
import os
import signal
import statistics
import uuid
from pathlib import Path

import pytest

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, Run
from tests.conftest import wait_for

# `make test` runs it once, in the PostgreSQL pass: the production database, where
# select_for_update guards a late result against a failure. SQLite keeps the real-worker tests
# of tests/benchsite/bench/lifecycle.
pytestmark = [pytest.mark.engine, pytest.mark.postgres_pass, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(600)]

RUN_TIMEOUT_S = 300
ENGINE_ARGS = ["--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"]


def _benchmark(tiny_model_dir, slug: str, **budget) -> Benchmark:
    return Benchmark.objects.create(
        name=slug, slug=slug, model=str(tiny_model_dir), gpu_pool="cpu", engine_args=ENGINE_ARGS,
        startup_timeout_s=240, time_limit_s=600, **budget,
    )


@pytest.fixture
def healthy_benchmark(tiny_model_dir):
    """The smallest budget that still shows a real decode: 16 tokens, a warmup, 2 repeats."""
    return _benchmark(tiny_model_dir, "tiny-e2e", max_tokens=16, repeats=2, warmup=1)


@pytest.fixture
def long_benchmark(tiny_model_dir):
    """Long enough (400 tokens x 20) to be killed while probing; only the doomed runs use it."""
    return _benchmark(tiny_model_dir, "tiny-e2e-long", max_tokens=400, repeats=20, warmup=0)


def _final(run_id):
    run = Run.objects.get(id=run_id)
    return run if run.is_final else None


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


def _marker() -> str:
    return f"BENCH_TEST_MARKER_{uuid.uuid4().hex.upper()}"


def test_engine_failures_then_a_form_run_succeeds_on_the_real_engine(
        healthy_benchmark, long_benchmark, celery_workers, client, django_user_model):
    explain = celery_workers.tails
    dying_marker, healthy_marker = _marker(), _marker()
    trigger.variant_create(benchmark=long_benchmark, name="bad flag", flags=["--enforce-eager", "--no-such-flag"])
    trigger.variant_create(benchmark=long_benchmark, name="dies mid-run", flags=["--enforce-eager"],
                            env={dying_marker: "1"})
    eager = trigger.variant_create(benchmark=healthy_benchmark, name="eager", flags=["--enforce-eager"],
                                    env={healthy_marker: "1"})
    bad, dying = trigger.runs_trigger(benchmark=long_benchmark, trigger=Run.Trigger.API)

    bad = wait_for(lambda: _final(bad.id), RUN_TIMEOUT_S, what="the bad-flag run", explain=explain)
    assert bad.state == Run.State.FAILED
    # vLLM's argparse, not our own "# engine command:" line (which holds the flag too)
    assert "error: unrecognized arguments: --no-such-flag" in bad.error, bad.error

    dying = wait_for(lambda: Run.objects.filter(id=dying.id, phase="probing decode").first() or _final(dying.id),
                     RUN_TIMEOUT_S, interval_s=0.5, what="the second run to start probing", explain=explain)
    assert dying.phase == "probing decode", dying.error
    pids = wait_for(lambda: _pids_with_marker(dying_marker), 30, what="the engine processes")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    dying = wait_for(lambda: _final(dying.id), 120, what="the killed run to fail", explain=explain)
    assert dying.state == Run.State.FAILED
    assert "engine exited" in dying.error and "last engine log lines" in dying.error, dying.error
    assert "(APIServer pid=" in dying.error  # the tail holds vLLM's own lines
    assert _pids_with_marker(dying_marker) == []

    # The healthy run comes from the web form and runs on the worker that just saw both failures.
    client.force_login(django_user_model.objects.create_user("alice", password="pw"))
    response = client.post(f"/b/{healthy_benchmark.slug}/trigger/", {"variants": [eager.id]})
    assert response.status_code == 302
    run = Run.objects.get(benchmark=healthy_benchmark)
    assert run.triggered_by.username == "alice" and run.trigger == Run.Trigger.FORM
    run = wait_for(lambda: _final(run.id), RUN_TIMEOUT_S, what="the form-triggered run", explain=explain)
    assert run.state == Run.State.SUCCEEDED, f"{run.state}: {run.error}\n{explain()}"
    assert run.worker_host and run.started_at <= run.finished_at
    decode = run.measurements.get(metric="decode_tok_s")
    assert decode.value > 0 and decode.direction == "higher"
    # 2 repeats asked; a repeat flagged as a burst is kept apart and replaced (up to 5 extra)
    assert len(decode.sample_flags) == len(decode.samples) == len(decode.details["tokens_per_repeat"])
    clean = [v for v, flag in zip(decode.samples, decode.sample_flags) if not flag]
    if clean:  # flagged repeats never count while a clean one exists
        assert decode.value == pytest.approx(statistics.median(clean))
    else:  # under CI's load every repeat may arrive in bursts: the probe then says so and uses them all
        assert any("no clean repeat" in w for w in decode.details["warnings"]), decode.details
        assert decode.value == pytest.approx(statistics.median(v for v in decode.samples if v is not None))
    assert set(decode.details["tokens_per_repeat"]) == {16}
    assert run.measurements.get(metric="itl_ms_p50").value > 0
    assert "Application startup complete" in run.artifacts.get(kind="server_log").read_text(max_bytes=64 << 20)
    assert _pids_with_marker(healthy_marker) == []  # a normal stop leaves no engine process behind
    assert celery_workers.alive("gpu") and celery_workers.alive("web")

    chart = client.get(f"/api/benchmarks/{healthy_benchmark.slug}/chart/").json()
    [series] = chart["variants"]
    assert series["name"] == "eager"
    assert [p["run"] for p in series["points"]] == [run.id]
    assert series["points"][0]["y"] == pytest.approx(decode.value, rel=1e-5)  # a chart keeps 6 significant digits
    assert series["points"][0]["build"] == "installed"  # what ran: this benchmark has no repository
