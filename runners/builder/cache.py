"""Built engines on disk, keyed by (repository, commit, patch hashes, base version), with a
size bound: least recently used entries are evicted after each new build.

CACHE/builds/<key prefix>/build.json marks a complete entry (its mtime is the last use);
an entry is built in a temporary directory beside it and renamed into place when done.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

MARKER = "build.json"


def build_key(*, repo: str, commit: str, patch_hashes: list[str], base_version: str) -> str:
    text = json.dumps({"repo": repo, "commit": commit, "patches": patch_hashes, "base": base_version},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _tree_bytes(path: Path) -> int:
    """Bytes under PATH, symlinks counted as links (the overlay's farm points into site-packages)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + dirnames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


class BuildCache:
    def __init__(self, root: Path, max_bytes: int):
        self.root = Path(root) / "builds"
        self.max_bytes = max_bytes

    def entry(self, key: str) -> Path:
        return self.root / key[:32]

    def get(self, key: str) -> dict | None:
        """The entry's record ({"dir", ...}) if built, and marks it used now."""
        marker = self.entry(key) / MARKER
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            return None
        if info.get("key") != key:
            return None
        os.utime(marker)
        return {**info, "dir": str(self.entry(key))}

    def put(self, key: str, build: Callable[[Path], dict]) -> dict:
        """Run BUILD(tmp_dir) -> record, then publish tmp_dir as the entry. Nothing is left
        behind when BUILD raises."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}.tmp-", dir=self.root))
        os.chmod(tmp, 0o755)
        try:
            info = {**build(tmp), "key": key, "built_at": time.time()}
            (tmp / MARKER).write_text(json.dumps(info, indent=1))
            try:
                os.rename(tmp, self.entry(key))
            except OSError:  # built concurrently by another worker: keep theirs
                if self.get(key) is None:
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return {**info, "dir": str(self.entry(key))}

    def entries(self) -> list[tuple[float, Path]]:
        """(last use, entry dir), oldest first."""
        found = []
        for d in self.root.iterdir() if self.root.is_dir() else ():
            marker = d / MARKER
            if d.name.startswith(".") or not marker.is_file():
                continue
            found.append((marker.stat().st_mtime, d))
        return sorted(found)

    def evict(self, *, keep: str | None = None) -> list[str]:
        """Remove least recently used entries until the cache fits its bound; never KEEP."""
        entries = [(used, d, _tree_bytes(d)) for used, d in self.entries()]
        total = sum(size for *_, size in entries)
        removed = []
        for used, d, size in entries:
            if total <= self.max_bytes:
                break
            if keep and d == self.entry(keep):
                continue
            shutil.rmtree(d, ignore_errors=True)
            total -= size
            removed.append(d.name)
        return removed
