"""A source build: the commit's whole tree, the patches, then the worker's configured build
command (an argv list; `{src}` and `{prefix}` are replaced by paths, never through a shell).
The engine then runs with PYTHONPATH=<prefix>."""
from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from .errors import BuildFailure
from .git import Mirror
from .patches import apply_patches

LOG_TAIL_LINES = 400  # of the build command's output kept in the build log


def source_build(*, mirror: Mirror, commit: str, patches: list[dict], command: list[str], dest: Path,
                 log: list[str], timeout_s: float, env: dict[str, str] | None = None) -> Path:
    """Build into DEST/prefix; returns it. ENV: the build's whole environment (None: this process's)."""
    src, prefix = dest / "src", dest / "prefix"
    mirror.export(commit, src)
    apply_patches(src, patches, log)
    prefix.mkdir()
    argv = [a.replace("{src}", str(src)).replace("{prefix}", str(prefix)) for a in command]
    log.append("$ " + " ".join(argv))
    started = time.monotonic()
    returncode, output = _run_into_log(argv, cwd=src, log=log, timeout_s=timeout_s, env=env)
    log.append(f"source build exit {returncode} after {time.monotonic() - started:.1f} s")
    if returncode != 0:
        tail = "\n".join(output[-20:])
        raise BuildFailure(f"source build failed (exit {returncode}):\n{tail}")
    return prefix


def _run_into_log(argv: list[str], *, cwd: Path, log: list[str], timeout_s: float,
                  env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run ARGV with its output appended to LOG line by line as it comes (a live log follows
    LOG from another thread, runners.outputs.livelog), keeping only its last LOG_TAIL_LINES there.
    Returns the exit status and those lines."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env=env)
    except FileNotFoundError:
        raise BuildFailure(f"source build command not found: {argv[0]!r}") from None
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout_s, stop)
    timer.start()
    start = len(log)
    try:
        for line in proc.stdout:
            log.append(line.rstrip("\n"))
            if len(log) - start > LOG_TAIL_LINES:
                del log[start]
        returncode = proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()
    if timed_out.is_set():
        raise BuildFailure(f"source build timed out after {timeout_s:.0f} s")
    return returncode, log[start:]
