"""Several real web-queue Celery workers record results at once on SQLite (the database of
`make run` and of a single GPU host): writers wait for each other instead of failing with
"database is locked", and every run is stored and judged (correctness and verdicts)."""
import json
import os
import signal
import subprocess
import sys

import pytest
from django.db import connection

from benchsite.bench.storage import artifacts
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, Run
from benchsite.celery import app
from tests.conftest import ROOT, Workers, _database_url, _die_with_parent, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(420)]

WORKERS, PROCESSES_EACH = 3, 2  # six writers at once, besides this process
BATCHES = 6  # x 3 variants: 18 runs


class WebWorkers(Workers):
    def start(self, name: str, queues: str) -> None:
        log = open(self.log_dir / f"worker-{name}.log", "ab")
        cmd = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", queues, "-c", str(PROCESSES_EACH),
               "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
        self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            process_group=0, preexec_fn=_die_with_parent)

    def stop(self) -> None:
        """A warm shutdown: each main process lets its pool finish the tasks in hand (judging, status
        reports) instead of the whole group taking SIGTERM mid-task."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _result(run, tokens):
    doc = {"token_ids": tokens, "logprobs": [{f"token_id:{t}": 0.0, "token_id:1": -5.0} for t in tokens]}
    files = [{"kind": "server_log", "name": "vllm-serve.log", "content": "INFO ready\n" * 200},
             {"kind": "probe_json", "name": "greedy.json", "content": json.dumps(doc)}]
    measurements = [{"metric": metric, "value": value + run.id % 3, "unit": unit, "direction": direction,
                     "samples": [value - 1, value, value + 1]}
                    for metric, value, unit, direction in (("decode_tok_s", 100.0, "tok/s", "higher"),
                                                           ("ttft_ms", 20.0, "ms", "lower"),
                                                           ("itl_ms_p50", 10.0, "ms", "lower"),
                                                           ("itl_ms_p99", 12.0, "ms", "lower"))]
    return {"measurements": measurements, "artifacts": artifacts.store_all(run.id, files),
            "host": {"hostname": "gpu-a", "cpu_model": "test cpu"}}


@pytest.mark.sqlite_only  # the embedded database's settings (make test runs it in the SQLite pass)
def test_sqlite_runs_in_wal_with_immediate_transactions_and_a_busy_timeout():
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    assert connection.transaction_mode == "IMMEDIATE"


@pytest.mark.sqlite_only  # the embedded database's concurrency
def test_several_web_workers_record_results_at_once_on_sqlite_without_a_lock_error(redis_broker, tmp_path):
    benchmark = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=32, repeats=3)
    for name in ("eager", "compiled", "fused"):
        trigger.variant_create(benchmark=benchmark, name=name, is_reference=name == "eager")
    runs = []
    for _ in range(BATCHES):
        runs += trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)  # to gpu.cpu: nobody reads it
    messages = []
    for run in runs:
        task_id = f"exec-{run.id}"
        Run.objects.filter(id=run.id).update(state=Run.State.RUNNING, task_id=task_id, worker_host="gpu-a")
        wrong = run.variant.name == "fused" and run.batch == runs[-1].batch  # one wrong output in the last batch
        messages.append((run.id, _result(run, [7] * 32 if wrong else list(range(100, 132))), task_id))

    workers = WebWorkers(redis_broker, _database_url(connection.settings_dict), tmp_path, pool="cpu")
    for i in range(WORKERS):
        workers.start(f"web{i}", "web")
    try:
        wait_for(lambda: all(" ready." in workers.log(f"web{i}") for i in range(WORKERS)), 180,
                 what="the web-queue workers", explain=workers.tails)
        for run_id, result, task_id in messages:  # heartbeats and results interleaved, as GPU workers send them
            app.send_task("bench.record_progress", args=[run_id, "probing decode"], kwargs={"task_id": task_id},
                          queue="web")
            app.send_task("bench.record_result", args=[run_id, result], kwargs={"task_id": task_id}, queue="web")

        def judged():
            return Run.objects.filter(id__in=[r.id for r in runs], state=Run.State.SUCCEEDED,
                                      judged_at__isnull=False).count() == len(runs)

        wait_for(judged, 300, what="every run stored and judged", explain=workers.tails)
    finally:
        workers.stop()

    logs = "".join(workers.log(f"web{i}") for i in range(WORKERS))
    assert logs.count("database is locked") == 0, workers.tails()
    assert "retry:" not in logs and "ERROR" not in logs, workers.tails()
    assert sum(f"bench.record_result[" in line and "succeeded" in line for line in logs.splitlines()) == len(runs)
    for run in Run.objects.filter(id__in=[r.id for r in runs]).select_related("variant"):
        assert run.judgement_missing == "", (run.id, run.judgement_missing)
        correct = run.measurements.get(metric="correct")
        wrong = run.variant.name == "fused" and run.batch == runs[-1].batch
        assert correct.value == (0.0 if wrong else 1.0), (run.id, correct.details)
        assert set(run.verdicts.values_list("metric", flat=True)) >= {"correct", "decode_tok_s", "itl_ms_p50"}
        assert all(a.error == "" and a.read_text() for a in run.artifacts.all()) and run.artifacts.count() == 2
