"""Bounded, streamed writes and reads of the artifact storage (benchsite/bench/storage/artifacts.py), on
a folder, on a real S3-compatible server, and on a real full disk."""
import hashlib
import io
import os

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchsite.bench.storage import artifacts
from runners.outputs.artifacts import CHUNK_BYTES

from .conftest import files_under, s3_keys

MiB = 1024 * 1024


def _trace(path, size: int) -> str:
    """A synthetic profiler trace of SIZE bytes (random, so no layer can compress it away)."""
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(os.urandom(MiB))
        f.write(os.urandom(size % MiB))
    return hashlib.sha256(path.read_bytes()).hexdigest()


class LargestRead(io.RawIOBase):
    """Records the largest single read the storage asks of the source."""

    def __init__(self, raw):
        self.raw, self.largest = raw, 0

    def read(self, n=-1):
        data = self.raw.read(n)
        self.largest = max(self.largest, len(data))
        return data


def test_a_file_is_streamed_in_chunks_hashed_and_read_back(fs_storage, tmp_path):
    sha = _trace(tmp_path / "rank0.pt.trace.json.gz", 20 * MiB + 123)
    with open(tmp_path / "rank0.pt.trace.json.gz", "rb") as raw:
        source = LargestRead(raw)
        ref = artifacts.store_stream(source, run_id=7, kind="profiler_trace", name="rank0.pt.trace.json.gz")
    assert source.largest <= CHUNK_BYTES  # never the whole 20 MiB at once
    assert (ref["size"], ref["sha256"]) == (20 * MiB + 123, sha)
    assert ref["file"].startswith("runs/7/") and ref["file"].endswith("-rank0.pt.trace.json.gz")
    assert hashlib.sha256(b"".join(artifacts.iter_chunks(artifacts.open_stream(ref["file"])))).hexdigest() == sha
    assert artifacts.ref_problem(ref, 7) is None


def test_the_tail_of_a_log_is_read_without_the_rest(fs_storage):
    log = "".join(f"INFO line {i}\n" for i in range(200_000)).encode()  # 3 MB
    ref = artifacts.store_content(log, run_id=1, kind="server_log", name="vllm-serve.log")
    tail = artifacts.read_tail(ref["file"], ref["size"], 4096)
    assert len(tail) == 4096 and tail.endswith("INFO line 199999\n")


def test_over_the_cap_nothing_is_kept(fs_storage, settings):
    settings.BENCH_ARTIFACT_MAX_BYTES = 3 * MiB
    with pytest.raises(artifacts.ArtifactError, match=r"big.trace not stored: .*larger than the limit of 3145728"):
        artifacts.store_stream(io.BytesIO(b"x" * (5 * MiB)), run_id=1, kind="profiler_trace", name="big.trace")
    assert files_under(fs_storage) == []
    ok = artifacts.store_stream(io.BytesIO(b"x" * (3 * MiB)), run_id=1, kind="profiler_trace", name="fits.trace")
    assert ok["size"] == 3 * MiB  # exactly at the cap is fine


def test_disk_full_gives_a_clear_error_and_leaves_no_partial_file(full_disk, tmp_path):
    """A real ENOSPC: a 1 MiB tmpfs and a 3 MiB trace."""
    _trace(tmp_path / "trace.json.gz", 3 * MiB)
    with pytest.raises(artifacts.ArtifactError, match=r"trace.json.gz not stored: disk full \(ENOSPC\) after \d+ bytes"):
        artifacts.store_path(tmp_path / "trace.json.gz", run_id=3, kind="profiler_trace", name="trace.json.gz")
    assert files_under(full_disk) == []
    # Others still go: what fits is stored, what does not says why.
    refs = artifacts.store_all(3, [{"kind": "probe_json", "name": "decode.json", "content": '{"ok": 1}'},
                                   {"kind": "profiler_trace", "name": "trace.json.gz",
                                    "path": str(tmp_path / "trace.json.gz")},
                                   {"kind": "server_log", "name": "gone.log", "path": str(tmp_path / "missing")}])
    assert refs[0]["size"] == 9 and "disk full (ENOSPC)" in refs[1]["error"] and "cannot read" in refs[2]["error"]
    assert files_under(full_disk) == [refs[0]["file"]]


def test_s3_multipart_upload_streams_and_reads_back(s3_storage, tmp_path):
    sha = _trace(tmp_path / "rank1.trace.json.gz", 19 * MiB)  # three 8 MiB parts
    with open(tmp_path / "rank1.trace.json.gz", "rb") as raw:
        source = LargestRead(raw)
        ref = artifacts.store_stream(source, run_id=5, kind="profiler_trace", name="rank1.trace.json.gz")
    assert source.largest <= 8 * MiB and (ref["size"], ref["sha256"]) == (19 * MiB, sha)
    assert s3_keys(s3_storage) == [f"bench/{ref['file']}"]  # under the configured prefix
    assert artifacts.ref_problem(ref, 5) is None
    stream = artifacts.open_stream(ref["file"])
    assert hashlib.sha256(b"".join(artifacts.iter_chunks(stream))).hexdigest() == sha
    tail = artifacts.read_bytes(ref["file"], start=19 * MiB - 10, max_bytes=100)  # a ranged GET
    assert tail == (tmp_path / "rank1.trace.json.gz").read_bytes()[-10:]


def test_s3_over_the_cap_and_a_missing_object(s3_storage, settings):
    settings.BENCH_ARTIFACT_MAX_BYTES = 10 * MiB
    with pytest.raises(artifacts.ArtifactError, match="larger than the limit"):
        artifacts.store_stream(io.BytesIO(b"y" * (20 * MiB)), run_id=5, kind="profiler_trace", name="big")
    assert s3_keys(s3_storage) == []  # the multipart upload was aborted
    ghost = {"kind": "server_log", "name": "x.log", "file": "runs/5/abc-x.log", "size": 1, "sha256": "0" * 64}
    assert "not found in the artifact storage" in artifacts.ref_problem(ghost, 5)


def test_a_reference_to_another_runs_file_is_refused(fs_storage):
    ref = artifacts.store_content("secret of run 1", run_id=1, kind="server_log", name="a.log")
    assert "is not a file of run 2" in artifacts.ref_problem(ref, 2)
    assert "is not a file of run 2" in artifacts.ref_problem({**ref, "file": "runs/2/../1/" + ref["file"][7:]}, 2)
    assert "the worker reported 999" in artifacts.ref_problem({**ref, "size": 999}, 1)


def test_the_check_command_creates_the_bucket_and_round_trips(settings, s3_server, s3_storage, capsys):
    s3_storage.delete_bucket(Bucket=s3_storage.bucket)
    call_command("bench_artifacts_check", "--create-bucket")
    out = capsys.readouterr().out
    assert f"created bucket s3://{s3_storage.bucket}/bench at {s3_server}" in out and "ok" in out
    assert s3_keys(s3_storage) == []  # the probe file was deleted
    assert "testing-secret" not in out


def test_the_check_command_fails_clearly(settings, tmp_path):
    from .conftest import use_storage
    from benchsite.storage_config import filesystem_artifacts_storage

    (tmp_path / "file").write_text("not a folder")
    use_storage(settings, filesystem_artifacts_storage(tmp_path / "file"))
    with pytest.raises(CommandError, match=r"artifact storage .*file is not usable"):
        call_command("bench_artifacts_check")
