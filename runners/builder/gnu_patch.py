"""GNU patch, the one way the builder applies a unified diff: the same flags, locale and time
limit for a git checkout (patches.py) and a Python overlay (overlay.py)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

PATCH_TIMEOUT_S = 120
# -p1: a/ and b/ prefixes; --forward: an applied patch is an error, not a prompt to reverse it;
# --batch: never ask; no .orig files left in the tree
FLAGS = ("-p1", "-u", "--forward", "--batch", "--no-backup-if-mismatch")


def gnu_patch(root: Path, patch_file: Path, *, dry_run: bool = False) -> subprocess.CompletedProcess:
    """Apply PATCH_FILE under ROOT (or only check it, DRY_RUN); stdout and stderr together, in the
    C locale so that the messages read the same everywhere. Raises FileNotFoundError without
    `patch`, subprocess.TimeoutExpired after PATCH_TIMEOUT_S."""
    cmd = ["patch", *FLAGS, *(["--dry-run"] if dry_run else []), "-d", str(root), "-i", str(patch_file)]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=PATCH_TIMEOUT_S, env={**os.environ, "LC_ALL": "C"})
