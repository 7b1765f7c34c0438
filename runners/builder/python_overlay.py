"""The Python-only fast path: a commit that differs from the installed base only in files of
the package (no compiled sources) runs as the installed vLLM with those files replaced.

The overlay is the symlink farm of runners.builder.overlay (every installed file a symlink),
then each file the commit adds or modifies under `vllm/` becomes a real file with the
commit's content, each it deletes is removed, and the patches are applied on top (checked
first). Compiled extensions keep coming from the install through their symlinks.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path, PurePosixPath

from . import overlay
from .errors import BuildFailure
from .git import Mirror
from .patches import apply_patches

# Paths whose change needs a compiler: vLLM's setup.py builds csrc/ with CMake.
COMPILED_PATTERNS = ("csrc/*", "cmake/*", "CMakeLists.txt", "setup.py", "pyproject.toml", "requirements/*",
                     "*.cu", "*.cuh", "*.cpp", "*.cc", "*.c", "*.h", "*.hpp", "*.pyx", "*.so")


def is_compiled(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in COMPILED_PATTERNS)


def classify(changes: list[tuple[str, str]], package: str) -> dict[str, list]:
    """{"compiled": paths, "package": [(status, path)], "other": paths (docs, tests: unused)}."""
    out: dict[str, list] = {"compiled": [], "package": [], "other": []}
    for status, path in changes:
        if is_compiled(path):
            out["compiled"].append(path)
        elif path.startswith(package + "/"):
            out["package"].append((status, path))
        else:
            out["other"].append(path)
    return out


def _check_inside(root: Path, rel: str) -> Path:
    parts = PurePosixPath(rel).parts
    if any(p in ("..", "") for p in parts) or rel.startswith("/"):
        raise BuildFailure(f"unsafe path in the commit: {rel!r}")
    cur = root
    for comp in parts[:-1]:
        cur = cur / comp
        if cur.is_symlink():
            raise BuildFailure(f"{rel}: {comp} is a symlinked directory in the installed package")
    return root / rel


def build_commit_overlay(*, mirror: Mirror, commit: str, package_changes: list[tuple[str, str]],
                         patches: list[dict], package_root: Path, dest: Path, log: list[str]) -> None:
    """DEST/<package> = installed package + the commit's changed package files + PATCHES."""
    package = package_root.name
    pkg = dest / package
    pkg.mkdir()
    n_links = overlay.symlink_farm(package_root, pkg)
    log.append(f"overlay: {n_links} links to {package_root}")
    wanted = [p for s, p in package_changes if s in "AMT"]
    contents = mirror.read_files(commit, wanted)
    for status, rel in package_changes:
        target = _check_inside(dest, rel)
        if status == "D":
            target.unlink(missing_ok=True)
        elif status == "A" and not (target.exists() or target.is_symlink()):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(contents[rel])
        else:
            overlay.materialize(dest, rel, "modify")
            target.write_bytes(contents[rel])
        log.append(f"  {status} {rel}")
    _apply_on_farm(dest, patches, log)


def _apply_on_farm(dest: Path, patches: list[dict], log: list[str]) -> None:
    """Patch files of the farm: each file a patch touches becomes a real copy first."""
    for p in patches:
        try:
            targets = overlay.patch_targets(p["content"], p["name"])
            for rel, action in targets.items():
                exists = (dest / rel).exists() or (dest / rel).is_symlink()
                overlay.materialize(dest, rel, "modify" if exists else action)
        except overlay.OverlayError as exc:
            raise BuildFailure(str(exc), kind="patch") from None
    apply_patches(dest, patches, log)
