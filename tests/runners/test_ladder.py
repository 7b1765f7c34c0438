"""The offline ladder (runners/ladder.py) builds its jobs as the service does and reports its host
as the GPU worker does: its runs, imported, carry the host fingerprint that verdicts compare
within (no "older worker" fallback to the host name)."""
import sys

import pytest

from benchsite.bench.lifecycle import imports
from runners import hostinfo
from runners.contract import LADDER_FORMAT, LadderFile
from runners.ladder import run_ladder
from tests.faults.harness import FAKE_ENGINE

BENCHMARK = {"name": "offline", "slug": "offline", "model": "/nonexistent/model", "prompt": "hello", "max_tokens": 4,
             "repeats": 1, "warmup": 0, "startup_timeout_s": 60, "probes": ["decode"]}


@pytest.mark.django_db
def test_an_imported_ladder_run_carries_the_host_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_VLLM_COMMAND", f"{sys.executable} {FAKE_ENGINE}")
    monkeypatch.setenv("BENCH_ENGINE_CPU", "0")
    variants = [{"name": "ok", "flags": [], "env": {}, "is_reference": True}]
    ladder = run_ladder({"benchmark": BENCHMARK, "variants": variants}, work_dir=tmp_path / "work")
    assert ladder["format"] == LADDER_FORMAT and LadderFile.from_dict(ladder).host == hostinfo.host_info()
    [entry] = ladder["runs"]
    assert entry["state"] == "SUCCEEDED" and entry["result"]["host"] == hostinfo.host_info()

    [run] = imports.runs_import(data=ladder)
    run.refresh_from_db()
    assert run.state == "SUCCEEDED" and run.measurements.filter(metric="decode_tok_s").exists()
    assert run.host_fingerprint == hostinfo.fingerprint(hostinfo.host_info())
    assert run.worker_host == hostinfo.host_info()["hostname"]


def test_a_variant_the_contract_refuses_fails_alone(tmp_path):
    benchmark = {**BENCHMARK, "probes": ["no_such_probe"]}
    ladder = run_ladder({"benchmark": benchmark, "variants": [{"name": "x"}]}, work_dir=tmp_path / "work")
    [entry] = ladder["runs"]
    assert entry["state"] == "FAILED" and "unknown probe 'no_such_probe'" in entry["error"]
