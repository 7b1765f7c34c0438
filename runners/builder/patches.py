"""Patches are checked (`patch --dry-run`) before they are applied; a patch that does not apply
fails the build as kind "patch" with the rejected hunks themselves in the message."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .errors import BuildFailure
from .gnu_patch import PATCH_TIMEOUT_S, gnu_patch

_FILE_RE = re.compile(r"^(?:patching|checking) file '?(.+?)'?$")
_FAILED_RE = re.compile(r"^Hunk #(\d+) FAILED")
_HUNK_MAX_CHARS = 4000


def _hunks_by_file(content: str) -> dict[str, list[str]]:
    """{path after -p1: [hunk text, ...]} of a unified diff."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    hunk: list[str] | None = None
    for line in content.splitlines():
        if line.startswith("+++ "):
            name = line[4:].split("\t", 1)[0].strip()
            name = name.split("/", 1)[1] if "/" in name else name
            current = files.setdefault(name, [])
            hunk = None
        elif line.startswith("@@") and current is not None:
            hunk = [line]
            current.append(hunk)  # type: ignore[arg-type]
        elif line.startswith(("diff ", "--- ", "Index: ")):
            hunk = None
        elif hunk is not None:
            hunk.append(line)
    return {f: ["\n".join(h) for h in hunks] for f, hunks in files.items()}


def rejected_hunks(content: str, output: str) -> list[str]:
    """The hunks GNU patch reported as FAILED (or a whole file it could not find), as text."""
    hunks = _hunks_by_file(content)
    rejected, current = [], None
    for line in output.splitlines():
        m = _FILE_RE.match(line.strip())
        if m:
            current = m.group(1)
            continue
        m = _FAILED_RE.match(line.strip())
        if m and current is not None:
            number = int(m.group(1))
            texts = hunks.get(current, [])
            if 0 < number <= len(texts):
                rejected.append(f"{current} hunk #{number}:\n{texts[number - 1][:_HUNK_MAX_CHARS]}")
        if "can't find file to patch" in line:
            rejected.append(line.strip())
    return rejected


def _patch(root: Path, patch_file: Path, *, dry_run: bool) -> subprocess.CompletedProcess:
    try:
        return gnu_patch(root, patch_file, dry_run=dry_run)
    except subprocess.TimeoutExpired:
        raise BuildFailure(f"patch {patch_file.name} timed out after {PATCH_TIMEOUT_S} s", kind="patch") from None


def patch_failure(name: str, content: str, output: str) -> BuildFailure:
    hunks = rejected_hunks(content, output)
    detail = "\n\n".join(hunks) if hunks else output.strip()[-_HUNK_MAX_CHARS:]
    return BuildFailure(f"patch {name!r} does not apply; rejected hunks:\n{detail}", kind="patch")


def apply_patches(root: Path, patches: list[dict], log: list[str]) -> None:
    """Apply PATCHES ({"name", "content"}) to the tree ROOT in order; each is dry-run first,
    so a failing patch leaves the tree as the previous patch left it."""
    for k, p in enumerate(patches):
        pfile = root.parent / f".patch-{os.getpid()}-{k}.diff"
        pfile.write_text(p["content"], encoding="utf-8")
        try:
            check = _patch(root, pfile, dry_run=True)
            if check.returncode != 0:
                log.append(check.stdout)
                raise patch_failure(p["name"], p["content"], check.stdout)
            done = _patch(root, pfile, dry_run=False)
            log.append(f"patch {p['name']}:\n{done.stdout.strip()}")
            if done.returncode != 0:
                raise patch_failure(p["name"], p["content"], done.stdout)
        finally:
            pfile.unlink(missing_ok=True)
