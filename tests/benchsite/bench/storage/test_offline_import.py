"""An offline result file's import (`manage.py bench_import`): it stores the logs' text and says
the traces stayed behind on the GPU host."""
import pytest

from benchsite.bench.lifecycle import imports
from runners.outputs.artifacts import file_artifact, inline_for_file


@pytest.mark.django_db
def test_an_import_stores_the_text_and_records_the_trace_as_not_stored(fs_storage, tmp_path):
    log = tmp_path / "vllm-serve.log"
    log.write_text("INFO ready\n")
    artifacts = inline_for_file([file_artifact("server_log", "vllm-serve.log", log),
                                 file_artifact("profiler_trace", "rank0.json.gz", "/gpu-host/work/rank0.json.gz")])
    [run] = imports.runs_import(data={"format": "decode-bench-ladder/1",
        "benchmark": {"name": "offline", "slug": "offline", "model": "m"},
        "runs": [{"variant": {"name": "eager"}, "state": "SUCCEEDED",
                  "result": {"measurements": [{"metric": "decode_tok_s", "value": 10.0}], "artifacts": artifacts}}]})
    assert run.artifacts.get(kind="server_log").read_text() == "INFO ready\n"
    trace = run.artifacts.get(kind="profiler_trace")
    assert trace.file == "" and "stayed on the GPU host at /gpu-host/work/rank0.json.gz" in trace.error
