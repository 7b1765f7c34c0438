"""Each fault, injected for real and followed until the service has recovered.

A scenario takes the running service (`Service`: private Redis, real workers, the fault
benchmark), injects its fault, checks every run is accounted for and returns its figures:
{"name", "injected", "survived", "runs_lost", "recovery_s", "details"}. A check that fails
raises AssertionError with the workers' logs (the tests fail; benchmarks/faults.py reports
survived=false). The tests in this folder add their own assertions on top.
"""
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .harness import FaultWorkers, PrivateRedis, group_alive, process_alive, wait_until


@dataclass
class Service:
    redis: PrivateRedis
    workers: FaultWorkers
    benchmark: object  # bench.models.Benchmark
    gate: Path  # the "gated" variant's engine answers its correctness request once this file exists
    db_proxy: object = None  # a TcpProxy between the workers and PostgreSQL (database_down)

    def trigger(self, variant: str):
        from benchsite.bench.lifecycle import trigger
        from benchsite.bench.models import Run

        [run] = trigger.runs_trigger(benchmark=self.benchmark, trigger=Run.Trigger.API,
                                      variants=[self.benchmark.variants.get(name=variant)])
        return run

    def run(self, run_id: int):
        from benchsite.bench.models import Run

        return Run.objects.get(id=run_id)

    def wait_run(self, run_id: int, predicate, timeout_s: float, what: str):
        return wait_until(lambda: (lambda r: r if predicate(r) else None)(self.run(run_id)), timeout_s, what,
                          explain=self.workers.tails)

    def wait_final(self, run_id: int, timeout_s: float = 60):
        return self.wait_run(run_id, lambda r: r.is_final, timeout_s, f"run {run_id} to end")

    def wait_engine_record(self, timeout_s: float = 30) -> dict:
        records, _ = wait_until(self.workers.engine_records, timeout_s, "an engine record",
                                explain=self.workers.tails)
        return records[0]

    def lost(self, run_ids) -> int:
        """Runs that are neither final nor on their way (a run left QUEUED or RUNNING for good)."""
        return sum(not self.run(i).is_final for i in run_ids)


def _result(name: str, runs_lost: int, recovery_s: float, **details) -> dict:
    return {"name": name, "injected": 1, "survived": runs_lost == 0, "runs_lost": runs_lost,
            "recovery_s": round(recovery_s, 2), "details": details}


def worker_sigkill(svc: Service) -> dict:
    """SIGKILL the GPU worker and its engine guard mid-decode: the reaper fails the run with the
    reason; the orphaned engine is stopped at the worker's next start."""
    run = svc.trigger("slow")
    svc.wait_run(run.id, lambda r: r.phase == "probing decode", 60, "the run to decode")
    record = svc.wait_engine_record()
    pgid = record["pgid"]
    # A whole-tree kill, the engine orphaned. The guard first: killed after the worker, it could
    # get its parent-death SIGTERM in between and stop the engine itself (it did once under load).
    os.kill(pgid, signal.SIGKILL)
    svc.workers.kill("gpu")
    t0 = time.monotonic()
    time.sleep(1)
    assert group_alive(pgid), "the engine should outlive its guard here: nothing to reap"
    failed, _ = svc.wait_run(run.id, lambda r: r.is_final, 30, "the reaper to fail the run")
    reaped_s = time.monotonic() - t0
    svc.workers.start("gpu", "gpu.cpu")
    _, orphan_s = wait_until(lambda: not group_alive(pgid), 30, "the orphaned engine to be stopped",
                             explain=svc.workers.tails)
    after = svc.trigger("ok")  # the next run has the machine to itself
    done, _ = svc.wait_final(after.id)
    assert done.state == "SUCCEEDED", done.error
    return _result("worker_sigkill", svc.lost([run.id, after.id]), reaped_s, state=failed.state,
                   error=failed.error, failure_kind=failed.failure_kind, orphan_stopped_s=round(orphan_s, 2))


def engine_fault(svc: Service, mode: str) -> dict:
    """The engine stops sending tokens (hang) or dies mid-stream (exit): the probe's deadline or
    the dead stream fails the run with the engine's last log lines, and the engine is stopped."""
    run = svc.trigger(mode)
    svc.wait_run(run.id, lambda r: r.state != "QUEUED", 60, "the run to start")
    t0 = time.monotonic()
    failed, _ = svc.wait_final(run.id, 60)
    recovery_s = time.monotonic() - t0
    pid = svc.workers.last_engine_pid()
    assert pid is not None, "the fake engine never started"
    wait_until(lambda: not process_alive(pid), 15, "the engine to be gone", explain=svc.workers.tails)
    assert not svc.workers.engine_records(), "the engine's record outlived it"
    return _result(f"engine_{mode}", svc.lost([run.id]), recovery_s, state=failed.state, error=failed.error,
                   failure_kind=failed.failure_kind, phase=failed.phase)


def redis_restart(svc: Service) -> dict:
    """Kill the broker (no persistence: every message is lost) while one run finishes and another
    waits in the queue, then start it again: the result arrives, the lost run is sent again."""
    first = svc.trigger("gated")
    waiting = svc.trigger("ok")  # behind it in gpu.cpu: the worker runs one job at a time
    svc.wait_run(first.id, lambda r: r.phase == "starting engine", 60, "the first run to start its engine")
    svc.wait_engine_record()
    svc.redis.kill()
    svc.gate.touch()  # the engine starts now and the run ends; the worker's result meets a dead broker
    wait_until(lambda: "waits for the broker" in svc.workers.log("gpu"), 60, "the result to wait for the broker",
               explain=svc.workers.tails)
    time.sleep(1)
    svc.redis.start()
    t0 = time.monotonic()
    done, _ = svc.wait_final(first.id, 60)
    requeued, _ = svc.wait_final(waiting.id, 60)
    recovery_s = time.monotonic() - t0
    assert done.state == "SUCCEEDED", done.error
    assert requeued.state == "SUCCEEDED", requeued.error
    return _result("redis_restart", svc.lost([first.id, waiting.id]), recovery_s, first=done.state,
                   requeued=requeued.state)


def duplicate_delivery(svc: Service) -> dict:
    """The same task (same id) delivered to a second worker after the visibility timeout, as
    Redis does with acks_late: the run executes once. Needs BENCH_VISIBILITY_TIMEOUT_S short."""
    run = svc.trigger("gated")  # its engine starts when we open the gate: the task stays unacked till then
    claimed, _ = svc.wait_run(run.id, lambda r: r.phase == "starting engine", 60, "the run to start its engine")
    time.sleep(4)  # past the visibility timeout: the unacknowledged message is visible again
    t0 = time.monotonic()
    svc.workers.start("gpu2", "gpu.cpu")  # restores visible messages as it starts
    wait_until(lambda: f"[{claimed.task_id}] received" in svc.workers.log("gpu2"), 60,
               "the second worker to receive the same task", explain=svc.workers.tails)
    wait_until(lambda: "skipped" in svc.workers.log("gpu2"), 60, "the duplicate to be skipped",
               explain=svc.workers.tails)
    skipped_s = time.monotonic() - t0
    svc.gate.touch()
    done, _ = svc.wait_final(run.id, 60)
    engine_log = (svc.workers.work_dir / f"run-{run.id}" / "vllm-serve.log").read_text()
    starts = engine_log.count("# engine command:")
    assert starts == 1, f"the engine was started {starts} times for one run"
    assert done.state == "SUCCEEDED", done.error
    return _result("duplicate_delivery", svc.lost([run.id]), skipped_s, executions=starts, task_id=claimed.task_id)


def cancel_running(svc: Service) -> dict:
    """Cancel a RUNNING run: its engine group is gone within 30 s and a late result cannot bring
    the run back."""
    from benchsite.bench.lifecycle import cancel
    from benchsite.celery import app

    run = svc.trigger("slow")
    svc.wait_run(run.id, lambda r: r.phase == "probing decode", 60, "the run to decode")
    pgid = svc.wait_engine_record()["pgid"]
    t0 = time.monotonic()
    assert cancel.run_cancel(run=svc.run(run.id))
    _, gone_s = wait_until(lambda: not group_alive(pgid), 30, "the engine group to be gone after cancel",
                           explain=svc.workers.tails)
    late = {"measurements": [{"metric": "decode_tok_s", "value": 123.0, "unit": "tok/s", "direction": "higher"}]}
    revive = app.send_task("bench.record_progress", args=[run.id, "probing decode", "RUNNING"], queue="web").id
    result = app.send_task("bench.record_result", args=[run.id, late], queue="web").id
    for task_id in (revive, result):  # the web worker's own account of each message
        wait_until(lambda: f"[{task_id}] succeeded" in svc.workers.log("web"), 30, "the late message to be handled",
                   explain=svc.workers.tails)
    assert re.search(rf"\[{result}\] succeeded in [0-9.e-]+s: False", svc.workers.log("web")), "result accepted"
    after = svc.run(run.id)
    assert after.state == "CANCELLED" and not after.measurements.exists(), (after.state, after.error)
    return _result("cancel_running", 0, time.monotonic() - t0, engine_gone_s=round(gone_s, 2), state=after.state)


# database_down: its clocks. The outage outlasts the heartbeat timeout, so a reaper that judged
# unheard heartbeats would fail the run, and the GPU worker's claim timeout, so a run that starts
# meanwhile is claimed by retries; web-queue retries wait at most BENCH_DB_RETRY_BACKOFF_MAX_S.
DATABASE_DOWN_ENV = {"BENCH_HEARTBEAT_TIMEOUT_S": "6", "BENCH_DB_RETRY_BACKOFF_MAX_S": "2", "BENCH_CLAIM_TIMEOUT_S": "3"}
DATABASE_OUTAGE_S = 8


def database_down(svc: Service) -> dict:
    """Cut the web worker's database (a TCP proxy in front of PostgreSQL: open connections
    closed, new ones refused) while a run ends on the GPU side and the next one is claimed;
    restore it: the result waits in the queue and lands once, the next run is taken by the
    claim's retry and succeeds."""
    assert svc.db_proxy is not None, "database_down needs the workers' database behind a TcpProxy"
    run = svc.trigger("gated")
    svc.wait_run(run.id, lambda r: r.phase == "starting engine", 60, "the run to start its engine")
    svc.wait_engine_record()
    svc.db_proxy.cut()
    cut_at = time.monotonic()
    svc.gate.touch()  # the run ends now; its result meets a web side without a database
    retry_line = r"bench\.record_result\[([^\]]+)\] retry: Retry in"
    retried, _ = wait_until(lambda: re.search(retry_line, svc.workers.log("web")), 60,
                            "the result to be retried while the database is down", explain=svc.workers.tails)
    result_task = retried.group(1)
    after = svc.trigger("ok")  # its claim meets the outage (the GPU worker retries it)
    wait_until(lambda: "bench.execute_run" in svc.workers.log("gpu") and " retry: Retry in" in svc.workers.log("gpu"),
               60, "the next run's claim to go unanswered and be retried", explain=svc.workers.tails)
    time.sleep(max(0.0, DATABASE_OUTAGE_S - (time.monotonic() - cut_at)))
    during = svc.run(run.id)  # this process reads the database directly: it never went away
    assert not during.is_final, f"run {run.id} became {during.state} while the web side had no database"
    svc.db_proxy.restore()
    outage_s = time.monotonic() - cut_at
    t0 = time.monotonic()
    done, _ = svc.wait_final(run.id, 60)
    recovery_s = time.monotonic() - t0
    assert done.state == "SUCCEEDED", done.error
    wait_until(lambda: f"[{result_task}] succeeded" in svc.workers.log("web"), 30, "the result task to return",
               explain=svc.workers.tails)
    next_run, _ = svc.wait_final(after.id)
    assert next_run.state == "SUCCEEDED", next_run.error
    metrics = list(svc.run(run.id).measurements.values_list("metric", flat=True))
    assert metrics and len(metrics) == len(set(metrics)), f"measurements stored more than once: {metrics}"
    web_log = svc.workers.log("web")
    landed = len(re.findall(rf"\[{result_task}\] succeeded in [0-9.e-]+s: True", web_log))
    assert landed == 1, f"the result was stored {landed} times"
    return _result("database_down", svc.lost([run.id, after.id]), recovery_s, state=done.state,
                   outage_s=round(outage_s, 1), measurements=len(metrics), results_stored=landed)


def disk_full_artifacts(svc: Service, disk) -> dict:
    """The artifact storage's disk is full (harness.FullDisk, the workers' BENCH_ARTIFACTS_DIR):
    the run still succeeds with its measurements, each artifact's row says 'disk full (ENOSPC)',
    and no partial file is left on the disk."""
    before = disk.files()
    run = svc.trigger("ok")
    t0 = time.monotonic()
    done, _ = svc.wait_final(run.id)
    recovery_s = time.monotonic() - t0
    assert done.state == "SUCCEEDED", done.error
    metrics = list(done.measurements.values_list("metric", flat=True))
    assert "decode_tok_s" in metrics, f"measurements did not land: {metrics}"
    rows = list(done.artifacts.all())
    not_stored = [a for a in rows if not a.file]
    assert rows and len(not_stored) == len(rows), [(a.name, a.file, a.error) for a in rows]
    assert all("disk full (ENOSPC)" in a.error and "nothing of it was kept" in a.error for a in not_stored), \
        [a.error for a in not_stored]
    partial = sorted(set(disk.files()) - set(before))
    assert not partial, f"partial files left on the full disk: {partial}"
    return _result("disk_full_artifacts", svc.lost([run.id]), recovery_s, state=done.state,
                   measurements=len(metrics), artifacts_not_stored=len(not_stored), partial_files=len(partial),
                   error=not_stored[0].error)
