"""A job with several workload points measures each in one engine start (runners.job, the decode
probe's measure_point): every measurement carries its point's id, the first point keeps
decode.json, and a point this worker cannot measure yet (open-loop arrivals), or the engine cannot
hold, is a note; a point at concurrency N goes to the multi-stream probe."""
import sys

import pytest

from runners.contract import JobResult
from runners.job import run_job
from runners.probes import decode_probe
from tests.faults.harness import FAKE_ENGINE

SPEC = {"model": "/nonexistent/model", "prompt": "hello", "max_tokens": 4, "repeats": 1, "warmup": 0,
        "probes": ["decode"]}
DECODE_METRICS = ["decode_tok_s", "ttft_ms", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99"]


@pytest.fixture
def fake_engine(monkeypatch):
    monkeypatch.setenv("BENCH_VLLM_COMMAND", f"{sys.executable} {FAKE_ENGINE}")
    monkeypatch.setenv("BENCH_ENGINE_CPU", "0")
    monkeypatch.setenv("BENCH_PROBE_TIMEOUT_S", "5")


def test_two_points_are_measured_in_one_engine_start(tmp_path, fake_engine):
    spec = {**SPEC, "workloads": [{"max_tokens": 4}, {"max_tokens": 6}, {"concurrency": 1, "max_tokens": 4,
                                                                          "request_rate": 4}]}
    phases = []
    result = run_job(spec, work_dir=tmp_path / "work", report=lambda phase, state=None: phases.append(phase))
    assert phases.count("starting engine") == 1
    assert [(m.point, m.metric) for m in result.measurements] == [
        *(("c1-p0-m4", name) for name in DECODE_METRICS), *(("c1-p0-m6", name) for name in DECODE_METRICS),
        *(("c1-p0-m4-r4", name) for name in DECODE_METRICS)]  # one stream a round: arrivals change nothing
    assert result.measurement("decode_tok_s", "c1-p0-m6").details["tokens_per_repeat"][0] == 6
    assert result.notes == []
    assert [a.name for a in result.artifacts] == ["vllm-serve.log", "decode.json", "decode-c1-p0-m6.json",
                                                  "decode-c1-p0-m4-r4.json"]
    assert JobResult.from_dict(result.to_dict()) == result


def test_the_single_point_job_measures_as_before(tmp_path, fake_engine):
    result = run_job(SPEC, work_dir=tmp_path / "work")
    assert [m.metric for m in result.measurements] == DECODE_METRICS
    assert {m.point for m in result.measurements} == {"c1-p0-m4"} and result.notes == []
    assert [a.name for a in result.artifacts] == ["vllm-serve.log", "decode.json"]


def test_measure_point_is_the_one_place_a_multi_stream_probe_plugs_in(tmp_path, fake_engine, monkeypatch):
    measured, args = [], []
    original = decode_probe.measure_point

    def wired(ctx, point):
        measured.append(point.id)
        args.append(ctx.engine_args)
        if point.concurrency == 1:
            return original(ctx, point)
        return {**original(ctx, decode_probe.WorkloadPoint(max_tokens=point.max_tokens)), "streams": point.concurrency,
                "prefill": "primed"}

    monkeypatch.setattr(decode_probe, "measure_point", wired)
    spec = {**SPEC, "workloads": [{"max_tokens": 4}, {"concurrency": 8, "prompt_tokens": 16, "max_tokens": 4},
                                  {"concurrency": 8, "prompt_tokens": 4000, "max_tokens": 4}],
            "engine_args": ["--max-model-len", "1024"]}
    result = run_job(spec, work_dir=tmp_path / "work")
    assert measured == ["c1-p0-m4", "c8-p16-m4"]  # the third exceeds --max-model-len: never sent
    assert result.notes == ["point c8-p4000-m4 skipped: 4004 tokens per request exceed --max-model-len 1024",
                            decode_probe.PRIMED_NOTE.format(points="c8-p16-m4")]  # the points measured in steady decode
    assert result.measurement("decode_tok_s", "c8-p16-m4").details["prefill"] == "primed"
    # every figure of the primed point names its method (a series of its own); the first point's none
    assert {m.details.get("method") for m in result.measurements if m.point == "c8-p16-m4"} == {"primed"}
    assert {m.details.get("method") for m in result.measurements if m.point == "c1-p0-m4"} == {None}
    assert {m.point for m in result.measurements} == {"c1-p0-m4", "c8-p16-m4"}
    assert args[0] == ["--max-model-len", "1024", "--max-num-seqs", "8"]  # sized from the points, the context kept


def test_a_point_at_concurrency_n_is_measured_by_the_multi_stream_probe(tmp_path, fake_engine):
    spec = {**SPEC, "workloads": [{"max_tokens": 4}, {"concurrency": 3, "max_tokens": 4}]}
    result = run_job(spec, work_dir=tmp_path / "work")
    assert result.notes == []
    assert {m.metric for m in result.measurements if m.point == "c3-p0-m4"} == {
        *DECODE_METRICS, "slowest_stream_tok_s", "aggregate_tok_s"}
    assert {m.metric for m in result.measurements if m.point == "c1-p0-m4"} == set(DECODE_METRICS)
