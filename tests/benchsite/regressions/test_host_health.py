"""Comm health check before a batch: the GPU worker runs the real comm probe (gloo on CPU here),
the web side stores the figure per host and flags a host that drifted from its own history, and
verdicts of that host's runs say so."""
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from benchsite.bench.worker import gpu_worker
from benchsite.bench.lifecycle import dispatch, trigger
from benchsite.bench.models import Run
from benchsite.celery import app
from benchsite.regressions.hosthealth import HealthMessageError, host_health_record
from benchsite.regressions.models import HostHealth, Verdict
from benchsite.regressions.tasks import record_host_health
from benchsite.regressions.verdicts import verdicts_compute
from runners import contract
from runners.config import RunnerConfig
from runners.envvars import EnvVarError
from runners.probes import health

from .conftest import add_run

KIND = {"backend": "gloo", "world_size": 2, "bytes": 65536}


def _history(hostname, figures, *, start=None):
    start = start or timezone.now() - timedelta(days=1)
    for i, us in enumerate(figures):
        host_health_record(doc={"hostname": hostname, **KIND, "allreduce_us": us}, now=start + timedelta(minutes=i))


def test_real_gloo_check_before_a_batch_flags_a_drifted_host(db, sent, monkeypatch):
    monkeypatch.setenv("BENCH_COMM_HEALTH_CHECK", "1")
    monkeypatch.setenv("BENCH_COMM_HEALTH_BYTES", "65536")
    monkeypatch.setattr(gpu_worker, "_HEALTH", health.BatchHealthCheck(
        check=lambda nbytes: health.allreduce_check(nbytes, backend="gloo", iters=10)))
    task = SimpleNamespace(app=app)
    reporter = gpu_worker.Reporter(app, 1, "task-1")
    config = gpu_worker.runner_config()
    gpu_worker._health_check(task, reporter, "batch-1", config)
    gpu_worker._health_check(task, reporter, "batch-1", config)  # the second run of the batch: no second check
    docs = [args[0] for name, args, _ in sent if name == "regressions.record_host_health"]
    assert len(docs) == 1
    doc = docs[0]
    assert (doc["backend"], doc["world_size"], doc["bytes"], doc["batch"]) == ("gloo", 2, 65536, "batch-1")
    assert doc["allreduce_us"] > 0 and doc["error"] == "" and doc["fingerprint"]
    measured = doc["allreduce_us"]

    # A known history at half the figure just measured: +100%, beyond the 25% default.
    _history(doc["hostname"], [measured / 2] * 5)
    assert record_host_health(doc)
    row = HostHealth.objects.order_by("-measured_at", "-id").first()
    assert row.flagged and row.baseline_us == pytest.approx(measured / 2) and row.drift == pytest.approx(1.0)
    assert "+100% from this host's median of 5 earlier checks" in row.note
    # The same figure on a host whose history matches it: not flagged.
    _history("steady", [measured] * 5)
    steady = host_health_record(doc={**doc, "hostname": "steady"})
    assert not steady.flagged and steady.drift == pytest.approx(0.0)


def test_check_is_off_on_cpu_by_default_and_bad_settings_are_named(monkeypatch):
    auto = RunnerConfig.from_env({})
    assert health.enabled(auto, {"gpu_count": 0}) is False and health.enabled(auto, {"gpu_count": 2}) is True
    calls = []
    check = health.BatchHealthCheck(check=lambda nbytes: calls.append(nbytes) or {"allreduce_us": 1.0})
    monkeypatch.setattr(health, "host_info", lambda: {"hostname": "cpu-host", "gpu_count": 0})
    assert check.before_run("b1", auto) is None and calls == []  # auto, on a CPU host: off
    on = RunnerConfig.from_env({"BENCH_COMM_HEALTH_CHECK": "1"})
    assert check.before_run("b1", on) == {"allreduce_us": 1.0, "batch": "b1"}
    assert check.before_run("b1", on) is None and check.before_run("", on) is None and calls == [1 << 20]
    with pytest.raises(EnvVarError, match="BENCH_COMM_HEALTH_CHECK='sometimes'"):
        RunnerConfig.from_env({"BENCH_COMM_HEALTH_CHECK": "sometimes"})
    with pytest.raises(EnvVarError, match="multiple of 4"):
        RunnerConfig.from_env({"BENCH_COMM_HEALTH_BYTES": "6"})


def test_enqueued_run_carries_its_batch(benchmark, sent):
    (run,) = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    dispatch.enqueue_run(run.id)
    (name, args, options) = [s for s in sent if s[0] == "bench.execute_run"][-1]
    assert args[0] == run.id and options["kwargs"] == {"batch": str(run.batch)}


def test_failed_probe_flags_and_bad_message_is_refused(db):
    row = host_health_record(doc={"hostname": "gpu-3", **KIND, "allreduce_us": None, "error": "RuntimeError: hang"})
    assert row.flagged and "failed: RuntimeError: hang" in row.note
    with pytest.raises(HealthMessageError, match="allreduce_us"):
        host_health_record(doc={"hostname": "gpu-3", **KIND, "allreduce_us": "fast"})
    assert record_host_health({"hostname": "", **KIND}) is False


def test_verdicts_of_a_flagged_host_say_so(benchmark):
    _history("host-a", [100.0] * 5)
    for v in [100.0, 102.0, 98.0, 101.0, 99.0]:
        add_run(benchmark, v, host="host-a")
    host_health_record(doc={"hostname": "host-a", **KIND, "allreduce_us": 160.0})  # +60%
    run = add_run(benchmark, 94.0, host="host-a")
    (verdict,) = [v for v in verdicts_compute(run=run) if v.metric == contract.DECODE_TOK_S]
    assert verdict.kind == Verdict.Kind.REGRESSION
    assert "host host-a flagged by its comm health check" in verdict.note and "+60%" in verdict.note
    # The next check is back in line: later runs are not flagged.
    host_health_record(doc={"hostname": "host-a", **KIND, "allreduce_us": 101.0})
    later = add_run(benchmark, 100.0, host="host-a")
    (verdict,) = [v for v in verdicts_compute(run=later) if v.metric == contract.DECODE_TOK_S]
    assert "flagged" not in verdict.note
