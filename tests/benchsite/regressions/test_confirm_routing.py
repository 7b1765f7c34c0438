"""The confirmation re-run goes to another worker host of the pool (its own queue) when the pool
has one of the same host fingerprint; a GPU worker consumes its host's queue besides the pool's."""
import socket
from datetime import timedelta

from django.utils import timezone

from benchsite.bench.lifecycle import claim, complete
from benchsite.bench.models import Run
from benchsite.celery import app
from benchsite.regressions.confirm import confirm_host
from benchsite.regressions.models import ChangePoint
from benchsite.regressions.pipeline import run_judge
from runners import contract
from runners.hostinfo import host_queue

from tests.conftest import wait_for
from .conftest import add_run, sha

H200 = "8x NVIDIA H200, driver 550.54.15, AMD EPYC 9654 96-Core Processor"
HOST = {"hostname": "gpu-b", "gpu_model": "NVIDIA H200", "gpu_count": 8, "driver": "550.54.15",
        "cpu_model": "AMD EPYC 9654 96-Core Processor"}
WOBBLE = [0.0, 1.0, -1.0, 0.5, -0.5]


def _history(benchmark, hosts):
    for i in range(10):
        run = add_run(benchmark, 100.0 + WOBBLE[i % 5], commit=sha(i + 1), host=hosts[i % len(hosts)], fingerprint=H200)
        run_judge(run_id=run.id)


def _regression(benchmark, django_capture_on_commit_callbacks) -> ChangePoint:
    slow = add_run(benchmark, 94.0, commit=sha(99), host="gpu-a", fingerprint=H200)
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=slow.id)
    return ChangePoint.objects.get(run=slow)


def test_rerun_goes_to_another_host_of_the_same_fingerprint(benchmark, sent, django_capture_on_commit_callbacks):
    _history(benchmark, ["gpu-a", "gpu-b"])
    add_run(benchmark, 100.0, host="gpu-c", fingerprint="no GPU, Intel Xeon")  # another machine type: never chosen
    cp = _regression(benchmark, django_capture_on_commit_callbacks)
    assert cp.confirmation == "pending"
    (queue,) = [o["queue"] for name, args, o in sent if name == "bench.execute_run" and args[0] == cp.confirm_run_id]
    assert queue == "gpu.cpu.host.gpu-b"
    # gpu-b's worker runs it and reports its fingerprint: the same series, so the figure is judged.
    rerun = cp.confirm_run
    assert claim.run_claim(run_id=rerun.id, task_id="t", worker_host="gpu-b")
    result = {"measurements": [contract.measurement(contract.DECODE_TOK_S, 93.9, samples=[93.9] * 3)], "host": HOST}
    with django_capture_on_commit_callbacks(execute=True):
        assert complete.run_complete(run_id=rerun.id, result=result)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status) == ("agreed", "confirmed")


def test_one_host_pool_and_stale_hosts_use_the_pool_queue(benchmark, sent, django_capture_on_commit_callbacks):
    _history(benchmark, ["gpu-a"])
    stale = add_run(benchmark, 100.0, host="gpu-b", fingerprint=H200)
    Run.objects.filter(id=stale.id).update(finished_at=timezone.now() - timedelta(days=3))  # gone for days
    cp = _regression(benchmark, django_capture_on_commit_callbacks)
    assert confirm_host(cp.run) == ""
    (queue,) = [o["queue"] for name, args, o in sent if name == "bench.execute_run" and args[0] == cp.confirm_run_id]
    assert queue == "gpu.cpu"


def test_gpu_worker_consumes_its_host_queue(celery_workers):
    """A real GPU worker started with -Q gpu.cpu takes a task sent to gpu.cpu.host.<its host>."""
    queue = host_queue("gpu.cpu", socket.gethostname())
    wait_for(lambda: f".> {queue} " in celery_workers.log("gpu"), 120, what="the GPU worker's queue list",
             explain=celery_workers.tails)
    result = app.send_task("regressions.trigger_canaries", queue=queue)
    wait_for(lambda: f"regressions.trigger_canaries[{result.id}] succeeded" in celery_workers.log("gpu"), 120,
             what="the GPU worker to run the task sent to its host queue",
             explain=celery_workers.tails)
    assert f"regressions.trigger_canaries[{result.id}]" not in celery_workers.log("web")
