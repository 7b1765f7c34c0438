"""Offline (`runners execute` / `runners ladder`): the result file carries the logs' tails
inline and the traces' paths (the import's side: tests/benchsite/bench/storage/test_offline_import.py)."""
from runners.outputs.artifacts import file_artifact, inline_for_file, text_artifact


def test_text_files_are_inlined_as_their_tail_and_traces_stay_paths(tmp_path):
    log = tmp_path / "vllm-serve.log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))  # 1.3 MB
    inlined = inline_for_file([file_artifact("server_log", "vllm-serve.log", log),
                               file_artifact("profiler_trace", "rank0.json.gz", tmp_path / "rank0.json.gz"),
                               text_artifact("probe_json", "decode.json", "{}")])
    assert len(inlined[0]["content"]) == 200_000 and inlined[0]["content"].endswith("line 99999\n")
    assert "path" not in inlined[0]
    assert inlined[1] == {"kind": "profiler_trace", "name": "rank0.json.gz", "path": str(tmp_path / "rank0.json.gz")}
    assert inlined[2]["content"] == "{}"


def test_the_profiler_traces_of_a_job_are_artifacts_by_path(tmp_path):
    from runners.probes.allreduce_probe import profiler_traces as _profiler_traces

    rank0 = tmp_path / "rank0.pt.trace.json.gz"
    rank0.write_bytes(b"\x1f\x8b trace")
    traces = _profiler_traces({"trace_files": [str(rank0), str(tmp_path / "vanished.json.gz")]})
    assert traces == [{"kind": "profiler_trace", "name": rank0.name, "path": str(rank0)}]
    assert _profiler_traces(None) == [] and _profiler_traces({"error": "no traces"}) == []
