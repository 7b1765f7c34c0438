"""The artifact storage (settings.STORAGES["artifacts"]): bounded, streamed writes and reads.

Both sides use it. The GPU worker writes what a job produced straight into it and sends the
web queue only references ({"kind", "name", "file", "size", "sha256"}); the web side checks
those, stores inline content (imports), reads log tails and streams downloads. A file is
copied in chunks with a size cap, hashed as it streams, and never held whole in memory; a
write that fails (disk full, over the cap, bucket gone) deletes what it had written and
raises ArtifactError with the reason. No model here: the GPU side imports this module.
"""
from __future__ import annotations

import errno
import io
import logging
import re
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages

from runners.contract import MAX_INLINE_CHARS  # noqa: F401 - inline content a broker message may carry
from runners.outputs.artifacts import CHUNK_BYTES, ArtifactTooLarge, BoundedHashingReader

log = logging.getLogger(__name__)

STORING_PHASE = "storing artifacts"  # a GPU worker's phase after the job, while it writes the files
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class ArtifactError(Exception):
    """An artifact was not stored or cannot be read; the message says which and why."""


def storage():
    return storages["artifacts"]


def describe_storage() -> str:
    """Where artifacts go, for messages (never a credential)."""
    store = storage()
    bucket = getattr(store, "bucket_name", None)
    if bucket:
        return f"s3://{bucket}/{store.location}".rstrip("/") + f" at {store.endpoint_url or 'AWS'}"
    return str(getattr(store, "location", type(store).__name__))


def ensure_bucket() -> bool:
    """S3: create the bucket if it is missing (True when created); other storages: False."""
    store = storage()
    if not getattr(store, "bucket_name", None):
        return False
    client = store.connection.meta.client
    try:
        client.head_bucket(Bucket=store.bucket_name)
        return False
    except Exception:  # noqa: BLE001 - botocore's ClientError 404: create it (a real error recurs below)
        client.create_bucket(Bucket=store.bucket_name)
        return True


def run_prefix(run_id: int) -> str:
    return f"runs/{run_id}/"


def _storage_name(run_id: int, name: str) -> str:
    """Unique per write, so that a failed write can delete exactly what it started."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")[:150] or "artifact"
    return f"{run_prefix(run_id)}{uuid.uuid4().hex[:12]}-{safe}"


def _reason(exc: BaseException, name: str, written: int) -> str:
    if isinstance(exc, ArtifactTooLarge):
        return f"artifact {name} not stored: {exc} (BENCH_ARTIFACT_MAX_BYTES); nothing of it was kept"
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return (f"artifact {name} not stored: disk full (ENOSPC) after {written} bytes in the artifact storage; "
                "nothing of it was kept")
    return f"artifact {name} not stored: {type(exc).__name__}: {exc}"


def _delete_quietly(store, file: str) -> None:
    try:
        store.delete(file)
    except Exception:  # noqa: BLE001 - the write's own error is the one to report
        log.exception("could not delete the partial artifact %s", file)


def store_stream(raw, *, run_id: int, kind: str, name: str, max_bytes: int | None = None) -> dict:
    """Copy RAW (a binary file object) into the storage in chunks; the reference, or ArtifactError."""
    reader = BoundedHashingReader(raw, max_bytes=max_bytes or settings.BENCH_ARTIFACT_MAX_BYTES, label=name)
    store, target = storage(), _storage_name(run_id, name)
    try:
        saved = store.save(target, File(reader, name=target))
    except Exception as exc:  # noqa: BLE001 - every failure deletes the partial file and says why
        _delete_quietly(store, target)
        raise ArtifactError(_reason(exc, name, reader.size)) from exc
    return {"kind": kind, "name": name, "file": saved, "size": reader.size, "sha256": reader.sha256}


def store_content(content: str | bytes, *, run_id: int, kind: str, name: str) -> dict:
    data = content.encode("utf-8") if isinstance(content, str) else content
    return store_stream(io.BytesIO(data), run_id=run_id, kind=kind, name=name)


def store_path(path: Path | str, *, run_id: int, kind: str, name: str) -> dict:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below; the storage reads it in chunks
    except OSError as exc:
        raise ArtifactError(f"artifact {name} not stored: cannot read {path}: {exc.strerror or exc}") from exc
    with raw:
        return store_stream(raw, run_id=run_id, kind=kind, name=name)


def store_all(run_id: int, artifacts: list[dict]) -> list[dict]:
    """What a job produced (runners.outputs.artifacts: content or path) as references; an artifact that
    could not be stored becomes {"kind", "name", "error"} and the others still go."""
    refs = []
    for artifact in artifacts:
        kind, name = artifact.get("kind", ""), str(artifact.get("name", ""))[:200]
        try:
            if artifact.get("path"):
                refs.append(store_path(artifact["path"], run_id=run_id, kind=kind, name=name))
            elif "content" in artifact:
                refs.append(store_content(artifact["content"], run_id=run_id, kind=kind, name=name))
            else:
                raise ArtifactError(f"artifact {name} has neither content nor a path")
        except ArtifactError as exc:
            log.warning("run %s: %s", run_id, exc)
            refs.append({"kind": kind, "name": name, "error": str(exc)[:2000]})
    return refs


def ref_problem(ref: dict, run_id: int) -> str | None:
    """Why a reference from a message cannot be trusted, or None. A worker may only point at
    files written for this run, and the file must be there with the size it says."""
    file, name = ref.get("file"), ref.get("name")
    if not isinstance(file, str) or not file.startswith(run_prefix(run_id)) or ".." in file.split("/"):
        return f"artifact {name}: {file!r} is not a file of run {run_id}"
    if not isinstance(ref.get("size"), int) or not _SHA256_RE.match(str(ref.get("sha256", ""))):
        return f"artifact {name}: size or sha256 missing"
    store = storage()
    try:
        size = store.size(file)
    except Exception:  # noqa: BLE001 - missing (FileNotFoundError, S3's 404 as ClientError)
        return (f"artifact {name} not found in the artifact storage: the GPU worker must write to the same "
                "storage as the web (docs/artifacts.md)")
    if size != ref["size"]:
        return f"artifact {name}: {size} bytes in the storage, the worker reported {ref['size']}"
    return None


def delete(file: str) -> None:
    if file:
        _delete_quietly(storage(), file)


def open_stream(file: str, *, start: int = 0):
    """A binary file object that reads the stored file from START, a chunk at a time. On S3 a
    ranged GET streams the object (django-storages' S3File would first download it whole)."""
    store = storage()
    try:
        opened = store.open(file, "rb")
    except Exception as exc:  # noqa: BLE001 - missing file, storage away
        raise ArtifactError(f"artifact {file} cannot be read: {type(exc).__name__}: {exc}") from exc
    s3_object = getattr(opened, "obj", None)
    if s3_object is not None:
        return s3_object.get(**({"Range": f"bytes={start}-"} if start else {}))["Body"]
    if start:
        opened.seek(start)
    return opened


def iter_chunks(stream, chunk_bytes: int = CHUNK_BYTES):
    try:
        while chunk := stream.read(chunk_bytes):
            yield chunk
    finally:
        stream.close()


def read_bytes(file: str, *, start: int = 0, max_bytes: int) -> bytes:
    stream = open_stream(file, start=start)
    try:
        return stream.read(max_bytes)
    finally:
        stream.close()


def read_tail(file: str, size: int, max_bytes: int) -> str:
    """The last MAX_BYTES of a stored text file, reading only those."""
    data = read_bytes(file, start=max(0, size - max_bytes), max_bytes=max_bytes)
    return data.decode("utf-8", errors="replace")
