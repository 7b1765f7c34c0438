"""Real Celery workers on the real Redis broker: claim, report back, fail cleanly.

No model is loaded here (the engine is asked for a model that does not exist), so these run
on PostgreSQL as well as SQLite (but the twice-delivered task: PostgreSQL); tests/e2e runs the
engine for real."""
import pytest

from benchsite.bench.lifecycle import cancel, dispatch, trigger
from benchsite.bench.models import Benchmark, Run
from benchsite.celery import app
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broken_benchmark(tmp_path):
    benchmark = Benchmark.objects.create(
        name="no model", slug="no-model", model=str(tmp_path / "missing-model"), gpu_pool="cpu",
        startup_timeout_s=120, time_limit_s=300,
    )
    trigger.variant_create(benchmark=benchmark, name="eager", flags=["--enforce-eager"])
    return benchmark


# PostgreSQL only: "once" rests on select_for_update, which SQLite does not do, and the engine's
# failed start (vLLM's imports, then its refusal) is the costliest thing in this file.
@pytest.mark.postgres_pass
def test_a_failing_engine_fails_the_run_once_even_when_the_task_is_delivered_twice(broken_benchmark, celery_workers):
    [run] = trigger.runs_trigger(benchmark=broken_benchmark, trigger=Run.Trigger.API)
    # A redelivered message (e.g. after a broker visibility timeout) must not run the job again.
    app.send_task("bench.execute_run", args=[run.id, dispatch.run_spec(run)], queue="gpu.cpu")

    run = wait_for(lambda: Run.objects.filter(id=run.id, state=Run.State.FAILED).first(), 240,
                   what="the run to fail", explain=celery_workers.tails)
    assert "starting engine" in run.error
    assert "last engine log lines" in run.error
    # vLLM's own refusal (through huggingface_hub), not our "# engine command:" line with the path
    assert "Repo id must be in the form" in run.error, run.error
    assert run.worker_host and run.task_id
    # The GPU worker wrote the whole log into the artifact storage itself; the broker carried its reference.
    log = run.artifacts.get(kind="server_log")
    assert log.error == "" and log.size > 0 and "Repo id must be in the form" in log.read_text(max_bytes=64 << 20)
    wait_for(lambda: "skipped" in celery_workers.log("gpu"), 60, what="the duplicate to be skipped",
             explain=celery_workers.tails)
    assert celery_workers.alive("gpu")


def test_a_run_cancelled_while_queued_is_never_executed(broken_benchmark, celery_workers):
    celery_workers.stop()  # nothing consumes while we cancel
    [run] = trigger.runs_trigger(benchmark=broken_benchmark, trigger=Run.Trigger.API)
    cancel.run_cancel(run=run)
    celery_workers.start("web", "web")
    celery_workers.start("gpu", "gpu.cpu")
    wait_for(lambda: "skipped" in celery_workers.log("gpu"), 120, what="the worker to skip the run",
             explain=celery_workers.tails)
    run.refresh_from_db()
    assert run.state == Run.State.CANCELLED and run.worker_host == ""
