"""Probes are plug-ins (runners/probes/registry.py): which probes a spec runs, what a probe module
adds when it is loaded, and a whole job on the fake engine with a plug-in probe among the
built-in ones (runners.job's director runs the stages in order)."""
import os
import subprocess
import sys

import pytest

from runners import contract
from runners.contract import JobSpec
from runners.job import JobError, run_job
from runners.probes import registry
from tests.faults.harness import FAKE_ENGINE

from .plugin import sample_probe  # noqa: F401 - a fixture

SPEC = {"model": "/nonexistent/model", "prompt": "hello", "max_tokens": 4, "repeats": 1, "warmup": 0}


def _names(spec: dict) -> list[str]:
    return [p.name for p in registry.selected_probes(JobSpec.from_dict(spec))]


BUILT_IN = ["decode", "correctness", "allreduce", "comm", "share", "membw", "weights"]


def test_the_built_in_probes_their_order_and_what_the_contract_learns_from_them():
    probes = [p for p in registry.all_probes() if type(p).__module__ in registry.BUILTIN_MODULES]
    assert [p.name for p in probes] == BUILT_IN
    assert set(BUILT_IN) <= contract.PROBE_NAMES
    declared = [m for p in probes for m in p.metrics]
    assert len({m.name for m in declared}) == len(declared)  # each metric declared by one probe
    assert all(contract.METRICS[m.name] == m for m in declared)
    assert contract.METRICS[contract.DECODE_TOK_S] == contract.Metric("decode_tok_s", "tok/s", "higher",
                                                                       "decode throughput")


def test_a_probe_declaring_another_probes_metric_is_refused_and_nothing_of_it_registered():
    class Copycat(registry.ProbeBase):
        name = "copycat"
        metrics = (contract.Metric("copycat_ms", "ms", "lower", "its own"),
                   contract.Metric(contract.TTFT_MS, "ms", "lower", "time to first token"))

    with pytest.raises(registry.ProbeRegistryError,
                       match="probe 'copycat' declares metric 'ttft_ms', which probe 'decode' already declares"):
        registry.register(Copycat())
    assert "copycat" not in contract.PROBE_NAMES and "copycat_ms" not in contract.METRICS
    assert contract.METRICS[contract.TTFT_MS].label == "time to first token"


def test_a_probe_registered_again_keeps_its_metrics(sample_probe):
    registry.register(sample_probe.SampleHealthProbe())  # its module imported twice
    assert contract.METRICS[sample_probe.HEALTH_MS].unit == "ms"


def test_the_built_in_probes_a_spec_selects():
    assert _names(SPEC) == ["decode", "correctness", "share", "membw", "weights"]  # TP=1: no comm, no allreduce
    assert _names({**SPEC, "probes": ["decode", "correctness"]}) == ["decode", "correctness", "weights"]
    assert _names({**SPEC, "probes": ["correctness"]}) == ["decode", "correctness", "weights"]  # decode always
    tp2 = {**SPEC, "tensor_parallel_size": 2, "probes": ["allreduce"]}
    assert _names(tp2) == ["decode", "allreduce", "share", "weights"]  # share comes with allreduce
    assert [p.stage for p in registry.selected_probes(JobSpec.from_dict(tp2))] == ["engine", "engine", "after", "after"]


def test_a_probe_module_adds_its_probe_and_its_metric(sample_probe):
    assert "sample_health" in contract.PROBE_NAMES
    assert contract.METRICS[sample_probe.HEALTH_MS].unit == "ms"
    assert _names(SPEC)[-1] == "sample_health"  # every probe that applies, when the spec lists none
    assert _names({**SPEC, "probes": ["sample_health"]}) == ["decode", "weights", "sample_health"]
    registry.unregister("sample_health")
    assert sample_probe.HEALTH_MS not in contract.METRICS
    with pytest.raises(contract.SpecError, match="unknown probe 'sample_health'"):
        JobSpec.from_dict({**SPEC, "probes": ["sample_health"]})


def test_a_missing_probe_module_is_refused_with_its_name():
    with pytest.raises(registry.ProbeRegistryError, match="probe module 'tests.no_such_probe' .* cannot be imported"):
        registry.load_probe_modules("tests.no_such_probe, ")
    assert registry.module_names(" a.b , ,c ") == ["a.b", "c"]


BROKEN = "tests.runners.probes.broken_probe"


def test_a_probe_module_that_raises_is_refused_with_its_name():
    with pytest.raises(registry.ProbeRegistryError,
                       match=f"probe module '{BROKEN}' .* RuntimeError: this probe module is broken on purpose"):
        registry.load_probe_modules(BROKEN)
    sys.modules.pop(BROKEN, None)


def test_a_gpu_worker_with_a_broken_probe_module_stops_at_start_naming_it():
    """The GPU worker's own command; it stops while Django starts, before it reaches the broker."""
    env = {**os.environ, "BENCH_PROBE_MODULES": BROKEN}
    started = subprocess.run([sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", "gpu.nowhere",
                              "--pool", "solo"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert f"probe module '{BROKEN}' (BENCH_PROBE_MODULES) cannot be imported" in started.stderr


def test_what_is_not_a_probe_is_refused():
    with pytest.raises(registry.ProbeRegistryError, match="is not a probe"):
        registry.register(object())

    class Bad(registry.ProbeBase):
        name, stage = "bad_stage", "during"

    with pytest.raises(registry.ProbeRegistryError, match="stage 'during' is not one of"):
        registry.register(Bad())


@pytest.fixture
def fake_engine(monkeypatch):
    monkeypatch.setenv("BENCH_VLLM_COMMAND", f"{sys.executable} {FAKE_ENGINE}")
    monkeypatch.setenv("BENCH_ENGINE_CPU", "0")
    monkeypatch.setenv("BENCH_PROBE_TIMEOUT_S", "5")


def test_a_job_runs_its_stages_with_a_plug_in_probe(tmp_path, fake_engine, sample_probe):
    phases = []
    spec = {**SPEC, "probes": ["decode", "correctness", "sample_health"]}
    result = run_job(spec, work_dir=tmp_path / "work", report=lambda phase, state=None: phases.append(phase))
    assert phases == ["starting engine", "probing decode", "probing correctness", "probing health (sample)",
                      "stopping engine"]
    assert [p.phase for p in result.phases] == phases
    assert [m.metric for m in result.measurements] == [
        "decode_tok_s", "ttft_ms", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", sample_probe.HEALTH_MS]
    health = result.measurement(sample_probe.HEALTH_MS)
    assert (health.unit, health.direction, health.details) == ("ms", "lower", {"status": 200})
    assert [a.name for a in result.artifacts] == ["vllm-serve.log", "decode.json", "greedy.json", "sample_health.json"]
    assert result.notes == ["health answered 200"] and result.host.has_fingerprint
    assert contract.JobResult.from_dict(result.to_dict()) == result


def test_a_failing_engine_stage_probe_fails_the_job_in_its_phase(tmp_path, fake_engine, sample_probe, monkeypatch):
    def broken(self, ctx):
        raise RuntimeError("planted")

    monkeypatch.setattr(type(registry._REGISTRY["sample_health"]), "run", broken)
    with pytest.raises(JobError, match="probing health \\(sample\\): planted") as failure:
        run_job({**SPEC, "probes": ["sample_health"]}, work_dir=tmp_path / "work")
    assert failure.value.failure_kind == "probe"
    assert [a["name"] for a in failure.value.artifacts] == ["vllm-serve.log"]
