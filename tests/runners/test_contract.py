"""The contract between the web side and the GPU workers (runners/contract.py): typed, versioned
dataclasses whose wire form is today's plain JSON. A message of an older schema (no `schema`
key: the shape before the field) is read; one of a newer schema, or malformed, is refused with
the reason."""
import json

import pytest

from runners import contract
from runners.contract import (LADDER_FORMAT, SCHEMA, ArtifactRef, BuildInfo, ContractError, EngineInfo, HostInfo,
                              JobResult, JobSpec, LadderFile, Measurement, PhaseTime, SettingCheck, SpecError, TookEffect)

# A result as a worker of the checkout before `schema` sent it (runners.job's dict literal),
# after the GPU worker stored its artifacts and added the host.
OLDER_RESULT = {
    "run_id": 7,
    "engine": {"startup_s": 12.5, "version": "0.11.0"},
    "build": {"path": "installed", "repo": "", "ref": "", "commit": "", "engine_version": "0.11.0", "patches": [],
              "cache_hit": True, "duration_s": 0.01},
    "took_effect": {"checks": []},
    "measurements": [
        {"metric": "decode_tok_s", "value": 50.0, "unit": "tok/s", "direction": "higher", "samples": [49.0, 51.0],
         "ci_low": 48.0, "ci_high": 52.0, "details": {"repeats_made": 2}, "sample_flags": ["", "burst"]},
        {"metric": "itl_ms_p50", "value": 20.0, "unit": "ms", "direction": "lower", "samples": [], "ci_low": None,
         "ci_high": None, "details": {}},
    ],
    "artifacts": [
        {"kind": "server_log", "name": "vllm-serve.log", "file": "runs/7/server_log/vllm-serve.log", "size": 10,
         "sha256": "a" * 64},
        {"kind": "probe_json", "name": "greedy.json", "content": "{}"},
        {"kind": "profiler_trace", "name": "rank0.json.gz", "error": "disk full"},
    ],
    "host": {"hostname": "gpu-1", "gpu_model": "NVIDIA H200", "gpu_count": 8, "driver": "550.54.15",
             "cpu_model": "AMD EPYC 9654 96-Core Processor"},
}


def test_a_result_of_the_older_schema_is_read_and_written_back_in_the_same_shape():
    result = JobResult.from_dict(OLDER_RESULT, broker=True)
    assert result.measurement("decode_tok_s").samples == [49.0, 51.0]
    assert result.build.path == "installed" and result.host.gpu_count == 8 and result.run_id == 7
    assert result.engine == EngineInfo(startup_s=12.5, version="0.11.0")
    wire = result.to_dict()
    assert wire["schema"] == SCHEMA
    # the report of a checkout that knew only its checks, in today's shape
    assert wire["took_effect"] == {"effective": {}, "checks": [], "flagged": False, "flagged_settings": [], "summary": ""}
    assert {k: v for k, v in wire.items() if k not in ("schema", "phases", "notes", "took_effect")} == \
        {k: v for k, v in OLDER_RESULT.items() if k != "took_effect"}
    assert JobResult.from_dict(json.loads(json.dumps(wire))) == result


def test_the_engine_took_effect_and_phases_are_typed_and_read_leniently():
    check = {"setting": "execution mode", "asked": "eager", "effective": "eager", "verdict": "applied",
             "evidence": ["enforce_eager=True"], "source": "variant", "why": "", "flag": False}
    report = {"effective": {"platform": "cpu"}, "checks": [check], "flagged": False, "flagged_settings": [],
              "summary": "1 applied"}
    result = JobResult.from_dict({"engine": {"startup_s": 3.5, "version": 11}, "took_effect": report, "phases": [
        {"phase": "starting engine", "duration_s": 3.5}, {"phase": "odd", "duration_s": "n/a"}, "not an object"]})
    assert result.engine == EngineInfo(startup_s=3.5)  # a version that is not text is unset
    assert result.took_effect.checks == [SettingCheck(**check)] and result.took_effect.to_dict() == report
    assert result.phases == [PhaseTime("starting engine", 3.5), PhaseTime("odd", None)]
    assert result.to_dict()["phases"] == [{"phase": "starting engine", "duration_s": 3.5},
                                          {"phase": "odd", "duration_s": None}]
    empty = JobResult.from_dict({"engine": "fast", "took_effect": {}})  # no engine log: no report
    assert empty.took_effect is None and empty.to_dict()["took_effect"] == {} and empty.engine == EngineInfo()
    older_check = TookEffect.from_dict({"checks": [{"setting": "NCCL_PROTO", "verdict": "applied"}]}).checks[0]
    assert (older_check.source, older_check.flag, older_check.evidence) == ("variant", False, [])


def test_the_smallest_result_is_read():
    result = JobResult.from_dict({"measurements": [{"metric": "decode_tok_s", "value": 1.0}]})
    m = result.measurement("decode_tok_s")
    assert (m.unit, m.direction, m.samples, m.sample_flags) == ("", "none", [], None)
    assert result.host is None and result.build is None and result.artifacts == []


@pytest.mark.parametrize("schema, reason", [
    (SCHEMA + 1, f"the result follows schema {SCHEMA + 1}, newer than this checkout's {SCHEMA}"),
    ("1", "the result: schema '1' is not a version number"),
    (-1, "the result: schema -1 is not a version number"),
])
def test_a_result_of_a_newer_or_unreadable_schema_is_refused(schema, reason):
    with pytest.raises(ContractError, match=reason):
        JobResult.from_dict({**OLDER_RESULT, "schema": schema})


def test_a_job_spec_of_a_newer_schema_is_refused_and_an_older_one_read():
    spec = {"model": "m", "prompt": "p", "max_tokens": 8, "repeats": 2}
    assert JobSpec.from_dict(spec).schema == SCHEMA  # the older shape: no `schema` key
    assert JobSpec.from_dict({**spec, "schema": SCHEMA}).to_dict()["schema"] == SCHEMA
    with pytest.raises(ContractError, match="newer than this checkout's"):
        JobSpec.from_dict({**spec, "schema": SCHEMA + 1})


# The wire form of each schema: each message's fields. A field renamed or dropped, or one added
# without a default, changes what a reader or writer of another checkout understands: raise
# SCHEMA, add the step that upgrades the older form (contract.upgrade_message), pin the fields here.
WIRE_FIELDS = {1: {
    JobSpec: ["model", "prompt", "max_tokens", "repeats", "run_id", "tensor_parallel_size", "warmup", "engine_args",
              "engine_env", "startup_timeout_s", "probes", "engine", "patches", "workloads", "packages", "schema"],
    contract.EngineSourceSpec: ["kind", "repo", "ref", "commit", "merge_base_with"],
    contract.PatchSpec: ["name", "content", "sha256", "origin"],
    contract.WorkloadPoint: ["max_tokens", "concurrency", "prompt_tokens", "request_rate"],
    JobResult: ["run_id", "engine", "build", "took_effect", "measurements", "artifacts", "host", "phases", "notes",
                "schema"],
    Measurement: ["metric", "value", "unit", "direction", "samples", "ci_low", "ci_high", "details", "sample_flags",
                  "point"],
    ArtifactRef: ["kind", "name", "content", "path", "file", "size", "sha256", "error"],
}}


def test_no_field_is_renamed_dropped_or_added_required_without_raising_the_schema():
    import dataclasses

    for cls, names in WIRE_FIELDS[SCHEMA].items():
        today = {f.name: f for f in dataclasses.fields(cls)}
        assert set(names) <= set(today), f"{cls.__name__}: {sorted(set(names) - set(today))} renamed or dropped"
        for name in set(today) - set(names):
            field = today[name]
            assert field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING, \
                f"{cls.__name__}.{name} added without a default: an older message lacks it"
    assert set(contract._SCHEMA_STEPS) == set(range(SCHEMA))  # every older schema has its step


def test_an_older_message_is_stepped_to_todays_shape_or_refused_naming_the_field(monkeypatch):
    """The steps as a schema 2 that renamed `warmup` to `warmups` would add them."""
    def renamed(message):
        if not isinstance(message.get("warmup", 1), int):
            raise ContractError(f"the job spec of schema 1: warmup {message['warmup']!r} is not a whole number")
        return {**{k: v for k, v in message.items() if k != "warmup"}, "warmups": message.get("warmup", 1)}

    monkeypatch.setattr(contract, "SCHEMA", 2)
    monkeypatch.setitem(contract._SCHEMA_STEPS, 1, renamed)
    assert contract.upgrade_message({"warmup": 3}, "the job spec") == {"warmups": 3, "schema": 2}  # schema 0: as 1
    assert contract.upgrade_message({"schema": 2, "warmups": 3}, "the job spec") == {"schema": 2, "warmups": 3}
    with pytest.raises(ContractError, match="warmup 'x' is not a whole number"):
        contract.upgrade_message({"schema": 1, "warmup": "x"}, "the job spec")
    with pytest.raises(ContractError, match="the job spec follows schema 3, newer than this checkout's 2"):
        contract.upgrade_message({"schema": 3}, "the job spec")


@pytest.mark.parametrize("change, reason", [
    ({"measurements": {"decode_tok_s": 1}}, "measurements must be a list of at most 200"),
    ({"measurements": [{"metric": "x", "value": "fast"}]}, "measurement 0 value is 'fast', not a finite number"),
    ({"measurements": [{"metric": "x", "value": 1, "direction": "up"}]}, "measurement 0 direction 'up' is not one of"),
    ({"measurements": [{"metric": "x", "value": 1, "samples": [1, "2"]}]}, "measurement 0 sample is '2'"),
    ({"artifacts": [{"kind": "server_log", "name": "log", "path": "/gpu/log"}]}, "artifact 0 content is NoneType"),
    ({"artifacts": [{"kind": "x", "name": "y", "file": "f", "size": 1, "sha256": "z"}]}, "artifact 0 sha256"),
    ({"build": ["installed"]}, "build is not an object"),
    ({"host": {"hostname": "h", "gpu_count": "8"}}, "host gpu_count '8' is not a whole number from 0 to 1024"),
    ({"host": {"hostname": 7}}, "host hostname is int, not a string"),
])
def test_a_malformed_result_is_refused_with_the_reason(change, reason):
    with pytest.raises(ContractError, match=reason):
        JobResult.from_dict({**OLDER_RESULT, **change}, broker=True)


def test_paths_stay_on_the_worker_side_of_the_broker():
    artifact = {"kind": "profiler_trace", "name": "rank0.json.gz", "path": "/work/rank0.json.gz"}
    assert ArtifactRef.from_dict(artifact).path == "/work/rank0.json.gz"  # a job's own result, offline
    with pytest.raises(ContractError, match="artifact 0 content"):
        ArtifactRef.from_dict(artifact, broker=True)
    with pytest.raises(ContractError, match=r"\(limit 65536\)"):
        ArtifactRef.from_dict({"kind": "probe_json", "name": "x", "content": "x" * 65_537}, broker=True)


def test_unknown_probe_names_are_refused_and_declared_ones_accepted():
    spec = {"model": "m", "prompt": "p", "max_tokens": 8, "repeats": 2}
    assert JobSpec.from_dict({**spec, "probes": ["decode", "correctness"]}).probes == ["decode", "correctness"]
    with pytest.raises(SpecError, match=r"unknown probe 'decod': the known probes are allreduce, comm, correctness, "):
        JobSpec.from_dict({**spec, "probes": ["decod"]})
    with pytest.raises(SpecError, match="probes must be a list of probe names"):
        JobSpec.from_dict({**spec, "probes": "decode"})
    contract.declare_probe("extra_probe")
    try:
        assert JobSpec.from_dict({**spec, "probes": ["extra_probe"]}).probes == ["extra_probe"]
    finally:
        contract.PROBE_NAMES.discard("extra_probe")


def test_one_function_builds_a_job_spec_from_a_benchmark_and_a_variant():
    benchmark = {"model": "m", "prompt": "p", "max_tokens": 8, "repeats": 5, "warmup": 0, "tensor_parallel_size": 2,
                 "engine_args": ["--dtype", "float32"], "engine_env": {"A": "1"}, "slug": "ignored", "probes": None}
    variant = {"name": "eager", "flags": ["--enforce-eager"], "env": {"B": "2"}}
    spec = JobSpec.for_variant(benchmark, variant, run_id=3, repeats=None, patches=[])
    assert spec.engine_args == ["--dtype", "float32", "--enforce-eager"] and spec.engine_env == {"A": "1", "B": "2"}
    assert (spec.run_id, spec.repeats, spec.warmup, spec.tensor_parallel_size, spec.probes) == (3, 5, 0, 2, None)
    assert JobSpec.for_variant(benchmark, variant, repeats=9).repeats == 9
    with pytest.raises(SpecError, match="unknown probe 'nope'"):
        JobSpec.for_variant({**benchmark, "probes": ["nope"]}, variant)


def test_host_info_without_the_fingerprint_fields_is_an_older_report():
    older = HostInfo.from_dict({"hostname": "h200-box", "gpus": ["NVIDIA H200"], "platform": "Linux"})
    assert not older.has_fingerprint and older.to_dict() == {"hostname": "h200-box", "gpus": ["NVIDIA H200"],
                                                              "platform": "Linux"}
    full = HostInfo.from_dict(OLDER_RESULT["host"])
    assert full.has_fingerprint and full.to_dict() == OLDER_RESULT["host"]
    assert older.fingerprint == "" and full.fingerprint == "8x NVIDIA H200, driver 550.54.15, AMD EPYC 9654 96-Core Processor"


def test_build_info_reads_wrong_types_as_unset_as_the_web_side_always_did():
    build = BuildInfo.from_dict({"path": "overlay", "commit": 7, "first_parent_depth": -1, "cache_hit": "yes",
                                 "ref": "x" * 300})
    assert (build.path, build.commit, build.first_parent_depth, build.cache_hit) == ("overlay", "", None, None)
    assert len(build.ref) == 250
    assert not BuildInfo.from_dict({}) and BuildInfo.from_dict(None) is None


def test_a_measurement_of_a_registered_metric_takes_its_unit_and_direction():
    m = Measurement.of(contract.TTFT_MS, 12.0, samples=[11.0, 13.0], sample_flags=["", "burst"])
    assert (m.unit, m.direction, m.clean_sample_flags()) == ("ms", "lower", ["", "burst"])
    assert Measurement.of(contract.TTFT_MS, 12.0, samples=[1.0], sample_flags=["a", "b"]).clean_sample_flags() == []


def test_a_metric_declared_twice_differently_is_refused():
    with pytest.raises(ContractError, match="already declared"):
        contract.declare_metric(contract.Metric(contract.DECODE_TOK_S, "tok/s", "lower", "decode throughput"))
    with pytest.raises(ContractError, match="direction 'up'"):
        contract.declare_metric(contract.Metric("new_metric", "", "up", "x"))


def test_the_ladder_file_format_is_checked():
    with pytest.raises(ContractError, match=f"not a ladder result file \\(format 'x', expected '{LADDER_FORMAT}'\\)"):
        LadderFile.from_dict({"format": "x"})
    with pytest.raises(ContractError, match="the ladder file's benchmark: unknown probe 'nope'"):
        LadderFile.from_dict({"format": LADDER_FORMAT, "benchmark": {"probes": ["nope"]}})
    ladder = LadderFile(benchmark={"slug": "b"}, host={"hostname": "h"}, runs=[{"state": "FAILED"}])
    assert LadderFile.from_dict(ladder.to_dict()) == ladder


def test_an_older_ladder_files_results_take_the_files_host_when_it_has_the_fingerprint():
    host, own = OLDER_RESULT["host"], {**OLDER_RESULT["host"], "hostname": "gpu-2"}
    runs = [{"state": "SUCCEEDED", "result": {"measurements": []}}, {"state": "SUCCEEDED", "result": {"host": own}},
            {"state": "FAILED", "error": "x"}]
    data = {"format": LADDER_FORMAT, "benchmark": {"slug": "b"}, "host": host, "runs": runs}
    read = LadderFile.from_dict(data)
    assert [JobResult.from_dict(r["result"]).host.hostname for r in read.runs[:2]] == ["gpu-1", "gpu-2"]
    assert read.runs[2] == runs[2] and "host" not in runs[0]["result"]  # the file itself is left as it was
    no_fingerprint = LadderFile.from_dict({**data, "host": {"hostname": "h"}})
    assert JobResult.from_dict(no_fingerprint.runs[0]["result"]).host is None
