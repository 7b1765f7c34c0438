"""The tail of what a job has logged so far (the build's log, then the engine's), readable from
another thread while the job runs: the service's GPU worker sends it to the web side every few
seconds, so that a hung build or engine start can be diagnosed before it ends.

    live = LiveLog()
    run_job(spec, work_dir=..., live=live)   # on one thread
    live.text()                              # on another: at most the last 64 KB
"""
from __future__ import annotations

import os
from pathlib import Path

MAX_BYTES = 64 * 1024


class LiveLog:
    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self.build_lines: list[str] = []  # the build appends its log lines here (runners.builder.prepare)
        self.engine_log: Path | None = None  # set once the engine is about to start

    def text(self) -> str:
        """The build log, then the engine log, cut to their last `max_bytes` bytes (whole lines)."""
        build = "\n".join(list(self.build_lines)).strip("\n")  # a copy: the job's thread appends
        engine = _file_tail(self.engine_log, self.max_bytes) if self.engine_log is not None else ""
        if build and engine:
            text = f"--- build log ---\n{build}\n--- engine log ---\n{engine}"
        else:
            text = build or engine
        return tail_bytes(text, self.max_bytes)


def tail_bytes(text: str, max_bytes: int) -> str:
    """TEXT's last MAX_BYTES bytes of UTF-8, starting at a line when it had to be cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    cut = data[-max_bytes:].decode("utf-8", errors="ignore")
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline < len(cut) - 1 else cut


def _file_tail(path: Path, max_bytes: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read(max_bytes)
    except OSError:  # not created yet
        return ""
    if size > max_bytes:  # started mid-line: from the next whole one
        data = data[data.find(b"\n") + 1:]
    return data.decode("utf-8", errors="replace").strip("\n")
