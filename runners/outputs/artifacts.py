"""Artifacts of a job (server log, build log, profiler traces, probe JSON), plain Python.

A job names its artifacts; it never loads a large one into memory. Small ones (probe JSON,
the build log) carry their `content`; files (the server log, profiler traces of hundreds of
MB) carry their `path` on the worker. The service's GPU worker streams both into the
artifact storage and sends only references (name, size, sha256) through the broker.
Offline (`python -m runners execute|ladder`), `inline_for_file` turns the text files into
bounded content so that the result JSON can be imported on another host.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from runners.contract import TEXT_ARTIFACT_KINDS

CHUNK_BYTES = 1024 * 1024
# What an offline result file keeps of a text artifact given by path (its tail).
INLINE_TAIL_CHARS = 200_000


class ArtifactTooLarge(ValueError):
    """An artifact is larger than the configured cap (the message says which and how large)."""


def text_artifact(kind: str, name: str, content: str) -> dict:
    return {"kind": kind, "name": name, "content": content}


def file_artifact(kind: str, name: str, path: Path | str) -> dict:
    return {"kind": kind, "name": name, "path": str(path)}


class BoundedHashingReader:
    """Wraps a binary file object: every read hashes what it returns (sha256) and counts it;
    past `max_bytes` the read raises ArtifactTooLarge. Whoever copies through it (Django's
    FileSystemStorage reads chunks, boto3 reads parts) never holds more than one chunk."""

    def __init__(self, raw, *, max_bytes: int, label: str):
        self.raw, self.max_bytes, self.label = raw, max_bytes, label
        self.size = 0
        self._sha = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def read(self, n: int = -1) -> bytes:
        # Never more than the cap plus one byte in one read, even when asked for "all".
        limit = self.max_bytes + 1 - self.size
        data = self.raw.read(limit if n is None or n < 0 else min(n, limit))
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.size += len(data)
        if self.size > self.max_bytes:
            raise ArtifactTooLarge(f"artifact {self.label} is larger than the limit of {self.max_bytes} bytes")
        self._sha.update(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False  # reading the file again would hash it twice

    @property
    def closed(self) -> bool:
        return getattr(self.raw, "closed", False)

    def close(self) -> None:
        self.raw.close()


def read_tail(path: Path | str, max_chars: int = INLINE_TAIL_CHARS) -> str:
    """The end of a text file, reading only its last bytes."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 4 * max_chars))
        return f.read().decode("utf-8", errors="replace")[-max_chars:]


def inline_for_file(artifacts: list[dict]) -> list[dict]:
    """For a result file read on another host: text files become their tail as content; other
    files (profiler traces) stay a path on this host, which an import reports as not stored."""
    out = []
    for a in artifacts:
        path = a.get("path")
        if path and a.get("kind") in TEXT_ARTIFACT_KINDS and Path(path).is_file():
            out.append(text_artifact(a["kind"], a["name"], read_tail(path)))
        else:
            out.append(a)
    return out
