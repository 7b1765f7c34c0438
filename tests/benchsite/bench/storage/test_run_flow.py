"""A run's artifacts end to end without an engine: the GPU worker's upload step (gpu_worker._store)
streams the job's files into the storage, the result message carries references only, the web
queue's task stores the rows, the run page lists them and the download streams them back."""
import hashlib
import json
import logging
import os

import pytest

from benchsite.bench.worker import gpu_worker
from benchsite.bench.lifecycle import cancel, claim, results, tasks, trigger
from benchsite.bench.storage.artifacts import MAX_INLINE_CHARS
from benchsite.bench.models import Benchmark, Run
from benchsite.celery import app

from .conftest import files_under, s3_keys

pytestmark = pytest.mark.django_db
MiB = 1024 * 1024


@pytest.fixture
def running(sent, django_capture_on_commit_callbacks):
    benchmark = Benchmark.objects.create(name="artifacts", slug="artifacts", model="m", max_tokens=8, repeats=1)
    trigger.variant_create(benchmark=benchmark, name="eager")
    with django_capture_on_commit_callbacks(execute=True):
        [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert claim.run_claim(run_id=run.id, task_id="exec-1", worker_host="gpu-1")
    return Run.objects.get(id=run.id)


def _job_artifacts(tmp_path, trace_bytes: int) -> tuple[list[dict], str]:
    """What runners.job returns: the server log and a trace by path, probe JSON inline."""
    trace = tmp_path / "rank0.1700000000.pt.trace.json.gz"
    with open(trace, "wb") as f:
        for _ in range(trace_bytes // MiB):
            f.write(os.urandom(MiB))
    (tmp_path / "vllm-serve.log").write_text("".join(f"INFO step {i}\n" for i in range(5000)) + "INFO shutdown\n")
    return [
        {"kind": "server_log", "name": "vllm-serve.log", "path": str(tmp_path / "vllm-serve.log")},
        {"kind": "probe_json", "name": "greedy.json", "content": json.dumps({"text": "hello", "token_ids": [1]})},
        {"kind": "profiler_trace", "name": trace.name, "path": str(trace)},
    ], hashlib.sha256(trace.read_bytes()).hexdigest()


def _result(artifacts: list[dict]) -> dict:
    return {"measurements": [{"metric": "decode_tok_s", "value": 42.0, "unit": "tok/s", "direction": "higher"}],
            "artifacts": artifacts}


def _upload(run, artifacts):
    return gpu_worker._store(gpu_worker.Reporter(app, run.id, "exec-1"), artifacts)


def _check_the_run_and_its_download(client, run, trace_sha):
    run.refresh_from_db()
    assert run.state == Run.State.SUCCEEDED and run.measurements.get(metric="decode_tok_s").value == 42.0
    trace = run.artifacts.get(kind="profiler_trace")
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "rank0.1700000000.pt.trace.json.gz" in page and "12.0\xa0MB" in page
    assert "INFO shutdown" in page  # the log tail, read from the end of the stored file
    download = client.get(f"/runs/{run.id}/artifacts/{trace.id}/")
    assert download.streaming and download["Content-Length"] == str(12 * MiB)
    assert download["Content-Disposition"] == f'attachment; filename="run-{run.id}-rank0.1700000000.pt.trace.json.gz"'
    assert download["Content-Type"] == "application/octet-stream"
    assert hashlib.sha256(download.getvalue()).hexdigest() == trace_sha == trace.sha256


@pytest.mark.parametrize("backend", ["filesystem", "s3"])
def test_the_worker_uploads_and_the_broker_carries_only_references(
        backend, request, running, sent, client, tmp_path):
    where = request.getfixturevalue("fs_storage" if backend == "filesystem" else "s3_storage")
    artifacts, trace_sha = _job_artifacts(tmp_path, 12 * MiB)
    refs = _upload(running, artifacts)
    assert ("bench.record_progress", [running.id, "storing artifacts", None]) in [(n, a) for n, a, _ in sent]
    message = json.dumps(_result(refs))
    assert len(message) < 2000  # 12 MB of trace, and the message is a few hundred characters
    assert all(set(r) == {"kind", "name", "file", "size", "sha256"} for r in refs)
    assert tasks.record_result(running.id, _result(refs), task_id="exec-1") is True
    _check_the_run_and_its_download(client, running, trace_sha)
    stored = s3_keys(where) if backend == "s3" else files_under(where)
    assert len(stored) == 3


def test_disk_full_on_the_worker_fails_the_artifact_not_the_run(running, full_disk, client, tmp_path):
    """A real ENOSPC (a 1 MiB tmpfs as the storage, a 3 MiB trace): the measurements land, the
    trace's row says why it is missing, and no partial file is left on the full disk."""
    artifacts, _ = _job_artifacts(tmp_path, 3 * MiB)
    refs = _upload(running, artifacts)
    assert tasks.record_result(running.id, _result(refs), task_id="exec-1") is True
    running.refresh_from_db()
    assert running.state == Run.State.SUCCEEDED and running.measurements.get(metric="decode_tok_s").value == 42.0
    trace = running.artifacts.get(kind="profiler_trace")
    assert trace.file == "" and "disk full (ENOSPC)" in trace.error and "nothing of it was kept" in trace.error
    assert sorted(a.name for a in running.artifacts.exclude(file="")) == ["greedy.json", "vllm-serve.log"]
    assert files_under(full_disk) == sorted(a.file for a in running.artifacts.exclude(file=""))
    page = client.get(f"/runs/{running.id}/").content.decode()
    assert "not stored: artifact rank0.1700000000.pt.trace.json.gz not stored: disk full (ENOSPC)" in page
    assert client.get(f"/runs/{running.id}/artifacts/{trace.id}/").status_code == 404


def test_a_late_result_brings_nothing_back_and_its_files_are_deleted(
        running, fs_storage, tmp_path, django_capture_on_commit_callbacks):
    artifacts, _ = _job_artifacts(tmp_path, 1 * MiB)
    refs = _upload(running, artifacts)
    assert cancel.run_cancel(run=running)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(running.id, _result(refs), task_id="exec-1") is False
    assert files_under(fs_storage) == [] and not running.artifacts.exists()


def test_a_worker_cannot_point_at_another_runs_files(running, fs_storage, caplog):
    other = results.artifact_create(run=running, kind="server_log", name="theirs.log", content="private")
    forged = {"kind": "server_log", "name": "x.log", "file": other.file, "size": other.size, "sha256": other.sha256}
    other_run = Run.objects.create(benchmark=running.benchmark, variant=running.variant, state=Run.State.RUNNING,
                                   task_id="exec-2", batch=running.batch)
    assert tasks.record_result(other_run.id, _result([forged]), task_id="exec-2") is True
    row = other_run.artifacts.get()
    assert row.file == "" and f"is not a file of run {other_run.id}" in row.error


def test_files_never_cross_the_broker(running, caplog):
    big = {"kind": "server_log", "name": "log", "content": "x" * (MAX_INLINE_CHARS + 1)}
    with caplog.at_level(logging.WARNING, logger="benchsite.bench.lifecycle.messages"):
        assert tasks.record_result(running.id, _result([big]), task_id="exec-1") is None
    assert f"(limit {MAX_INLINE_CHARS})" in caplog.text
    running.refresh_from_db()
    assert running.state == Run.State.BUILDING
