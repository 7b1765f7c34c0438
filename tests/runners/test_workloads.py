"""Workload points (runners.contract.WorkloadPoint): their ids, their validation, how a job spec
carries them, the engine sizing they ask for and which points an engine cannot hold
(runners/workloads.py)."""
import json

import pytest

from runners import workloads
from runners.contract import (JobResult, JobSpec, Measurement, SpecError, WorkloadPoint, default_point_id,
                              workload_points)

SPEC = {"model": "m", "prompt": "hello", "max_tokens": 64, "repeats": 2}


@pytest.mark.parametrize("point, expected", [
    ({"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256}, "c16-p8192-m256"),
    ({"concurrency": 1, "prompt_tokens": 128, "max_tokens": 256, "request_rate": 4}, "c1-p128-m256-r4"),
    ({"concurrency": 8, "max_tokens": 32, "request_rate": 0.5}, "c8-p0-m32-r0.5"),
    ({"max_tokens": 128}, "c1-p0-m128"),
])
def test_a_point_id_names_concurrency_prompt_output_and_rate(point, expected):
    assert WorkloadPoint.from_dict(point).id == expected


@pytest.mark.parametrize("point, reason", [
    ({"concurrency": 0, "max_tokens": 8}, "point 1: concurrency 0 is not a whole number from 1 to 1024"),
    ({"concurrency": 1025, "max_tokens": 8}, "concurrency 1025 is not a whole number from 1 to 1024"),
    ({"concurrency": 2, "max_tokens": 8, "batch": 3}, "point 1: unknown key 'batch'"),
    ({"max_tokens": 8, "prompt_tokens": 0}, "prompt_tokens 0 is not a whole number"),
    ({"max_tokens": 8, "prompt_tokens": "512"}, "prompt_tokens '512' is not a whole number"),
    ({"max_tokens": 8, "prompt_tokens": 1.5}, "prompt_tokens 1.5 is not a whole number"),
    ({"max_tokens": 8, "request_rate": 0}, "request_rate 0 is not a number of requests per second above 0"),
    ({"concurrency": 2}, "point 1: max_tokens is missing"),
    ("c1-p0-m8", "is not a mapping"),
])
def test_a_bad_point_is_refused_with_the_reason(point, reason):
    with pytest.raises(SpecError, match=reason):
        workload_points([point], 64)


def test_a_point_listed_twice_is_refused():
    with pytest.raises(SpecError, match="c2-p0-m8 listed twice"):
        workload_points([{"concurrency": 2, "max_tokens": 8}, {"max_tokens": 8, "concurrency": 2}], 64)


def test_a_spec_without_workloads_measures_the_single_point_of_its_max_tokens():
    spec = JobSpec.from_dict(SPEC)
    assert [p.id for p in spec.workloads] == ["c1-p0-m64"] == [default_point_id(64)]
    assert spec.default_point.id == "c1-p0-m64"
    assert workloads.engine_args(spec) == []  # sized as before


def test_a_spec_with_workloads_round_trips_through_json():
    points = [{"concurrency": 1, "max_tokens": 64}, {"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256},
              {"concurrency": 4, "prompt_tokens": 128, "max_tokens": 32, "request_rate": 2.5}]
    spec = JobSpec.from_dict({**SPEC, "workloads": points})
    wire = json.loads(json.dumps(spec.to_dict()))
    assert wire["workloads"] == points
    assert JobSpec.from_dict(wire) == spec
    assert [p.id for p in spec.workloads] == ["c1-p0-m64", "c16-p8192-m256", "c4-p128-m32-r2.5"]


def test_for_variant_takes_the_benchmark_workloads():
    benchmark = {**SPEC, "workloads": [{"concurrency": 2, "max_tokens": 8}]}
    spec = JobSpec.for_variant(benchmark, {"flags": []}, run_id=1)
    assert [p.id for p in spec.workloads] == ["c2-p0-m8"]
    with pytest.raises(SpecError, match="concurrency 0"):
        JobSpec.for_variant({**SPEC, "workloads": [{"concurrency": 0, "max_tokens": 8}]}, {})


def test_a_measurement_carries_its_point_and_a_single_point_one_keeps_its_wire_form():
    plain = Measurement.of("decode_tok_s", 10.0)
    assert "point" not in plain.to_dict() and plain.point == ""
    at16 = Measurement.from_dict({**plain.to_dict(), "point": "c16-p0-m8"})
    assert at16.to_dict()["point"] == "c16-p0-m8"
    result = JobResult.from_dict({"measurements": [plain.to_dict(), at16.to_dict()]})
    assert result.measurement("decode_tok_s", "c16-p0-m8") is result.measurements[1]
    assert result.measurement("decode_tok_s") is result.measurements[0]


def test_the_engine_is_sized_from_the_points_unless_the_benchmark_sets_it():
    points = [{"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256}, {"concurrency": 1, "max_tokens": 512}]
    spec = JobSpec.from_dict({**SPEC, "workloads": points})
    assert workloads.engine_args(spec) == ["--max-model-len", "8704", "--max-num-seqs", "16"]
    fixed = JobSpec.from_dict({**SPEC, "workloads": points, "engine_args": ["--max_model_len=9000", "--max-num-seqs", "32"]})
    assert workloads.engine_args(fixed) == []


def test_a_point_the_engine_cannot_hold_is_skipped_with_the_reason():
    log = "INFO ... Maximum concurrency for 8,704 tokens per request: 3.50x\n"
    kv = workloads.kv_capacity_tokens(log)
    assert kv == 30464 and workloads.kv_capacity_tokens("no such line") is None
    big = WorkloadPoint(concurrency=16, prompt_tokens=8192, max_tokens=256)
    small = WorkloadPoint(concurrency=2, prompt_tokens=8192, max_tokens=256)
    assert "need 135168 tokens of KV cache, the engine has 30464" in workloads.skip_reason(big, args=[], kv_tokens=kv)
    assert workloads.skip_reason(small, args=["--max-model-len", "8704"], kv_tokens=kv) == ""
    assert "exceed --max-model-len 4096" in workloads.skip_reason(small, args=["--max-model-len=4096"], kv_tokens=None)
