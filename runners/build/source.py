"""A source build: the commit's whole tree, the patches, then the worker's configured build
command (an argv list; `{src}` and `{prefix}` are replaced by paths, never through a shell).
The engine then runs with PYTHONPATH=<prefix>."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .errors import BuildFailure
from .git import Mirror
from .patches import apply_patches

LOG_TAIL_CHARS = 20_000


def source_build(*, mirror: Mirror, commit: str, patches: list[dict], command: list[str], dest: Path,
                 log: list[str], timeout_s: float) -> Path:
    """Build into DEST/prefix; returns it."""
    src, prefix = dest / "src", dest / "prefix"
    mirror.export(commit, src)
    apply_patches(src, patches, log)
    prefix.mkdir()
    argv = [a.replace("{src}", str(src)).replace("{prefix}", str(prefix)) for a in command]
    log.append("$ " + " ".join(argv))
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout_s)
    except FileNotFoundError:
        raise BuildFailure(f"source build command not found: {argv[0]!r}") from None
    except subprocess.TimeoutExpired:
        raise BuildFailure(f"source build timed out after {timeout_s:.0f} s") from None
    log.append(proc.stdout[-LOG_TAIL_CHARS:])
    log.append(f"source build exit {proc.returncode} after {time.monotonic() - started:.1f} s")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-20:])
        raise BuildFailure(f"source build failed (exit {proc.returncode}):\n{tail}")
    return prefix
