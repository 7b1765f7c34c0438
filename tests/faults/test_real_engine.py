"""The one fault that needs the real engine: vLLM's engine-core does not exit when its API
server is killed, so a worker killed together with the engine's guard leaves a real
`vllm serve` group holding the CPU (a GPU on a GPU host). The worker's next start stops it."""
import os
import signal
import time

import pytest

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, Run
from runners.engine.guard import group_members
from tests.conftest import TEST_ENGINE_ARGS, _database_url

from .harness import FaultWorkers, PrivateRedis, group_alive, point_app_at, restore_app, wait_until

# One real engine start for the whole fault suite: in the PostgreSQL pass only (make test).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine, pytest.mark.postgres_pass,
              pytest.mark.timeout(300)]


@pytest.fixture
def real_engine_workers(tmp_path, transactional_db):
    from django.db import connection

    redis = PrivateRedis(tmp_path)
    redis.start()
    workers = FaultWorkers(redis.url, _database_url(connection.settings_dict), tmp_path,
                           extra_env={"BENCH_VLLM_COMMAND": None, "BENCH_ENGINE_CPU": None,
                                      "BENCH_HEARTBEAT_TIMEOUT_S": "6"})
    saved = point_app_at(redis.url)
    workers.start_service()
    yield workers
    workers.stop()
    restore_app(saved)
    redis.kill()


def _live(pgid: int) -> list[int]:
    return [pid for pid, state in group_members(pgid) or [] if state != "Z"]


def test_a_real_engine_orphaned_by_a_worker_kill_is_stopped_at_the_workers_next_start(
        real_engine_workers, tiny_model_dir):
    workers = real_engine_workers
    benchmark = Benchmark.objects.create(name="real", slug="real", model=str(tiny_model_dir), gpu_pool="cpu",
                                         max_tokens=8, repeats=1, warmup=1, startup_timeout_s=240, time_limit_s=300)
    trigger.variant_create(benchmark=benchmark, name="eager", flags=TEST_ENGINE_ARGS)
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    records, _ = wait_until(workers.engine_records, 120, "the engine to start", explain=workers.tails)
    pgid = records[0]["pgid"]
    # guard + API server + engine-core: the processes that would hold the GPU
    wait_until(lambda: len(_live(pgid)) >= 3, 180, "vLLM's engine core to start", explain=workers.tails)
    workers.kill("gpu")
    os.kill(pgid, signal.SIGKILL)  # the guard dies with it: nothing left to stop vLLM
    time.sleep(2)
    orphans = _live(pgid)
    assert orphans, "vLLM exited with its parent: this test shows nothing"
    workers.start("gpu", "gpu.cpu")
    _, stopped_s = wait_until(lambda: not group_alive(pgid), 60, "the orphaned engine to be stopped",
                              explain=workers.tails)
    assert "stopping orphaned engine group" in workers.log("gpu")
    failed = wait_until(lambda: Run.objects.filter(id=run.id, state=Run.State.FAILED).first(), 60,
                        "the reaper to fail the run", explain=workers.tails)[0]
    assert "no heartbeat from worker" in failed.error
    print(f"{len(orphans)} orphaned vLLM processes stopped {stopped_s:.1f} s after the worker restarted")
