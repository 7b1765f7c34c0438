"""Apply unified-diff patches to an INSTALLED vLLM without touching the installation.

    overlay = cached_overlay([{"name": "fix.patch", "content": text}], cache_dir)
    spec = EngineSpec(model=..., env=overlay_env(overlay))   # PYTHONPATH=overlay:...

How. `build_overlay(patches, dest)` makes `dest/vllm` a *symlink farm* of the installed
`vllm` package: every directory is recreated as a real directory, every file is a symlink
to the installed file. Each file a patch touches is replaced by a real copy first, then the
patches are applied in order with GNU `patch -p1 -u --forward --batch --no-backup-if-mismatch
-d DEST` (diff paths are `a/vllm/...`, `b/vllm/...`, as `git diff` writes them inside a vLLM
checkout). Running Python with `PYTHONPATH=dest` first makes `import vllm` resolve to the
overlay: PYTHONPATH entries precede site-packages in `sys.path`, and the environment is
inherited by vLLM's engine-core and worker processes (fork or spawn alike), so the patched
code runs where the model runs. Compiled extensions (`_C.abi3.so`) and data files are reached
through their symlinks; the distribution metadata (`vllm-*.dist-info`) stays in site-packages.

Safety, checked BEFORE anything is written:
- every path a patch names (`---`/`+++` headers after stripping one component, `Index:`,
  `diff --git`) must be relative, free of `..`, NUL, backslashes and quotes,
  and lie inside `vllm/`; a file it modifies must exist in the installed package (a new
  file, `--- /dev/null`, is allowed inside `vllm/`);
- only unified diffs are accepted (`-u`; no context diffs or ed scripts); binary patches,
  git renames/copies and mode changes are refused (GNU patch would chmod through a symlink);
- every patched path is checked again after the farm is built: no component of it may be a
  symlink (a symlinked directory in the installed tree would lead writes outside).

Atomicity: the overlay is built in a temporary directory next to `dest` and renamed onto
`dest` only when every patch applied. A patch that does not apply raises `PatchError` with
patch's own output, and nothing is left behind: never a half-applied overlay.

Caching: `overlay_key(patches, package_root)` is the sha256 of the installed vLLM's version,
its real path, and the patch contents in order (names do not count). `dest/.overlay.json`
records the key; `build_overlay` reuses a complete overlay with the same key, and
`cached_overlay(patches, cache_dir)` puts each key in its own directory, so the same set
of patches is built once per installation.

No Django here (runners/ runs on GPU hosts without the web app), no shell.
"""
from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from .gnu_patch import PATCH_TIMEOUT_S, gnu_patch

PACKAGE = "vllm"
MARKER = ".overlay.json"
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_OUTPUT_MAX = 8000


class OverlayError(RuntimeError):
    """The overlay cannot be built (bad patch set, unsafe path, missing package...)."""


class PatchError(OverlayError):
    """A patch does not apply (or is malformed). `output` holds GNU patch's output."""

    def __init__(self, message: str, *, patch_name: str | None = None, output: str = ""):
        super().__init__(message)
        self.message = message
        self.patch_name = patch_name
        self.output = output


# ----------------------------------------------------------------------------- parsing

def _header_path(rest: str) -> str:
    """The file name of a `--- `/`+++ ` header: up to a tab (timestamp) or end of line."""
    name = rest.split("\t", 1)[0].rstrip("\r\n")
    if name.endswith(" ") and "\t" not in rest:
        name = name.rstrip(" ")
    return name


def _check_rel_path(path: str, *, where: str, strip: int) -> str:
    """Validate PATH as named in a patch; return it relative to the overlay root (posix)."""
    if not path:
        raise OverlayError(f"{where}: empty file name")
    if "\0" in path or "\\" in path or path.startswith('"'):
        raise OverlayError(f"{where}: unsupported or quoted file name {path!r}")
    if path.startswith("/") or path.startswith("~"):
        raise OverlayError(f"{where}: absolute file name {path!r} refused")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise OverlayError(f"{where}: file name {path!r} contains '..' (refused)")
    if len(parts) <= strip:
        raise OverlayError(f"{where}: file name {path!r} has no component left after -p{strip}")
    rel = parts[strip:]
    if rel[0] != PACKAGE or len(rel) < 2:
        raise OverlayError(
            f"{where}: {path!r} is outside {PACKAGE}/ (after -p{strip} it is {'/'.join(rel)!r}); "
            f"write paths as a/{PACKAGE}/..., b/{PACKAGE}/...")
    return "/".join(rel)


def patch_targets(content: str, name: str = "patch") -> dict[str, str]:
    """Validate one unified diff; return {path relative to the overlay root: action}.

    action is "modify", "create" or "delete". Raises OverlayError (unsafe or unsupported)
    or PatchError (malformed). Hunk bodies are skipped by their line counts, so a removed
    line that starts with "-- " is not mistaken for a header.
    """
    if not isinstance(content, str):
        raise OverlayError(f"{name}: patch content must be text")
    if "\0" in content:
        raise OverlayError(f"{name}: patch contains NUL bytes (binary patches are not supported)")
    lines = content.splitlines()
    targets: dict[str, str] = {}
    i, n = 0, len(lines)
    files = 0
    while i < n:
        _refuse_unsupported(lines, i, name)
        if lines[i].startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            rel = _file_header(lines, i, name, targets)
            files += 1
            i = _skip_hunks(lines, i + 2, name, rel)
            continue
        i += 1
    if files == 0:
        raise PatchError(f"{name}: no unified-diff file header (--- a/{PACKAGE}/... / +++ b/{PACKAGE}/...) found",
                         patch_name=name)
    return targets


def _refuse_unsupported(lines: list[str], i: int, name: str) -> None:
    """OverlayError for what an overlay cannot apply (binary, context diffs, renames, copies,
    modes), and for a file name outside the package in a `diff --git` or `Index:` line."""
    line = lines[i]
    if line.startswith("GIT binary patch") or (line.startswith("Binary files ") and line.endswith(" differ")):
        raise OverlayError(f"{name}: binary patches are not supported")
    if line.startswith("*** ") and i + 1 < len(lines) and lines[i + 1].startswith("--- "):
        raise OverlayError(f"{name}: context diffs are not supported; use a unified diff (diff -u, git diff)")
    for prefix in ("rename from ", "rename to ", "copy from ", "copy to "):
        if line.startswith(prefix):
            raise OverlayError(f"{name}: git renames and copies are not supported ({line.strip()!r})")
    if line.startswith("old mode ") or line.startswith("new mode "):
        raise OverlayError(f"{name} line {i + 1}: file mode changes are not supported ({line.strip()!r})")
    if line.startswith("diff --git "):
        names = line[len("diff --git "):].split(" ")
        if len(names) != 2:
            raise OverlayError(f"{name} line {i + 1}: cannot read the file names of {line.strip()!r}")
        for nm in names:
            _check_rel_path(nm, where=f"{name} line {i + 1}", strip=1)
    if line.startswith("Index: "):
        _check_rel_path(line[7:].strip(), where=f"{name} line {i + 1}", strip=0)


def _file_header(lines: list[str], i: int, name: str, targets: dict[str, str]) -> str:
    """The `---`/`+++` pair at line I: its path (recorded in TARGETS with its action)."""
    old = _header_path(lines[i][4:])
    new = _header_path(lines[i + 1][4:])
    where = f"{name} line {i + 1}"
    if old == "/dev/null" and new == "/dev/null":
        raise PatchError(f"{where}: both sides are /dev/null", patch_name=name)
    if old == "/dev/null":
        rel, action = _check_rel_path(new, where=where, strip=1), "create"
    elif new == "/dev/null":
        rel, action = _check_rel_path(old, where=where, strip=1), "delete"
    else:
        rel = _check_rel_path(new, where=where, strip=1)
        if _check_rel_path(old, where=where, strip=1) != rel:
            raise OverlayError(f"{where}: old and new names differ ({old!r}, {new!r}); renames are not supported")
        action = "modify"
    if rel in targets and targets[rel] != action:
        action = "modify" if targets[rel] == "create" else action
    targets.setdefault(rel, action)
    return rel


def _skip_hunks(lines: list[str], i: int, name: str, rel: str) -> int:
    """Past the hunks that follow a file header at line I (at least one); the next line's index."""
    n = len(lines)
    hunks = 0
    while i < n:
        m = _HUNK_RE.match(lines[i])
        if not m:
            break
        hunks += 1
        old_left = int(m.group(2)) if m.group(2) is not None else 1
        new_left = int(m.group(4)) if m.group(4) is not None else 1
        i = _skip_hunk_body(lines, i + 1, old_left, new_left, name, rel)
        while i < n and lines[i].startswith("\\"):
            i += 1
    if hunks == 0:
        raise PatchError(f"{name} line {i}: no hunk after the header of {rel}", patch_name=name)
    return i


def _skip_hunk_body(lines: list[str], i: int, old_left: int, new_left: int, name: str, rel: str) -> int:
    """Past one hunk's body starting at line I, by its line counts; the next line's index."""
    n = len(lines)
    while (old_left > 0 or new_left > 0) and i < n:
        body = lines[i]
        if body.startswith("\\"):  # "\ No newline at end of file"
            i += 1
            continue
        tag = body[:1]
        if tag == " " or body == "":
            old_left -= 1
            new_left -= 1
        elif tag == "-":
            old_left -= 1
        elif tag == "+":
            new_left -= 1
        else:
            raise PatchError(f"{name} line {i + 1}: unexpected line inside a hunk: {body[:80]!r}",
                             patch_name=name)
        i += 1
    if old_left > 0 or new_left > 0:
        raise PatchError(f"{name}: truncated hunk for {rel}", patch_name=name)
    return i


def _normalize_patches(patches) -> list[dict]:
    if isinstance(patches, (str, bytes, dict)) or not isinstance(patches, (list, tuple)):
        raise OverlayError("patches must be a list of {'name': str, 'content': str}")
    out = []
    for k, p in enumerate(patches):
        if not isinstance(p, dict) or not isinstance(p.get("content"), str):
            raise OverlayError(f"patch #{k} must be a dict with a 'content' string")
        name = p.get("name") or f"patch-{k}"
        if not isinstance(name, str) or "\n" in name or "\0" in name:
            raise OverlayError(f"patch #{k}: bad name {name!r}")
        out.append({"name": name, "content": p["content"]})
    return out


# ----------------------------------------------------------------------------- package

def installed_package_root() -> Path:
    """The installed `vllm` package directory of this interpreter, found WITHOUT importing it.

    PYTHONPATH overlays are skipped: the root is the first `vllm` on sys.path that is not
    itself an overlay (no MARKER next to it)."""
    import sys

    for entry in sys.path:
        base = Path(entry or ".")
        cand = base / PACKAGE / "__init__.py"
        if cand.is_file() and not (base / MARKER).exists():
            return (base / PACKAGE).resolve()
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise OverlayError(f"no installed {PACKAGE!r} package found for this interpreter")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def package_version(package_root: Path) -> str:
    """The version of the vLLM at PACKAGE_ROOT, read from its `_version.py` (no import)."""
    vfile = Path(package_root) / "_version.py"
    try:
        text = vfile.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    m = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text, re.M)
    if m:
        return m.group(1)
    # unknown version: fall back to the content hash of the package's __init__.py
    init = Path(package_root) / "__init__.py"
    return "unknown-" + hashlib.sha256(init.read_bytes()).hexdigest()[:16]


def overlay_key(patches, package_root: Path | None = None) -> str:
    """sha256 over the installed vLLM (version, real path) and the patch contents, in order."""
    patches = _normalize_patches(patches)
    root = Path(package_root).resolve() if package_root else installed_package_root()
    h = hashlib.sha256()
    h.update(b"vllm-overlay-v1\0")
    h.update(package_version(root).encode() + b"\0")
    h.update(str(root).encode() + b"\0")
    for p in patches:
        data = p["content"].encode("utf-8")
        h.update(str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- building

def symlink_farm(src: Path, dst: Path) -> int:
    """Recreate SRC's directories under DST; symlink every file (and symlink) to SRC's."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = os.path.relpath(dirpath, src)
        target_dir = dst if rel == "." else dst / rel
        target_dir.mkdir(exist_ok=True)
        keep = []
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if os.path.islink(full):  # a symlinked directory stays a symlink (checked later)
                os.symlink(os.path.realpath(full), target_dir / d)
                count += 1
            else:
                keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            os.symlink(os.path.join(dirpath, f), target_dir / f)
            count += 1
    return count


def materialize(root: Path, rel: str, action: str) -> None:
    """Make ROOT/REL a real, writable file (for 'modify'/'delete'), after checking that no
    component of the path is a symlink (a write must not leave the overlay)."""
    parts = PurePosixPath(rel).parts
    cur = root
    for comp in parts[:-1]:
        cur = cur / comp
        if cur.is_symlink():
            raise OverlayError(f"{rel}: {cur.relative_to(root)} is a symlink in the installed package; refusing to patch through it")
        if cur.exists() and not cur.is_dir():
            raise OverlayError(f"{rel}: {cur.relative_to(root)} is not a directory")
    path = root / rel
    if action == "create":
        if path.exists() or path.is_symlink():
            raise OverlayError(f"{rel}: the patch creates it, but it exists in the installed package")
        return
    if not path.is_symlink() and not path.is_file():
        raise OverlayError(f"{rel}: the patch modifies it, but the installed package has no such file")
    if path.is_symlink():
        real = Path(os.path.realpath(path))
        if not real.is_file():
            raise OverlayError(f"{rel}: not a regular file in the installed package")
        path.unlink()
        shutil.copyfile(real, path)
        os.chmod(path, 0o644)
    # The installed byte code (reached through the symlinked __pycache__ entries) is for the
    # original source; drop it so Python compiles the patched file (it would also notice the
    # changed mtime/size, but a same-size patch applied within the same second would not).
    pycache = path.parent / "__pycache__"
    stem = path.name[:-3] if path.name.endswith(".py") else None
    if stem and pycache.is_dir():
        for pyc in pycache.glob(f"{stem}.*.pyc"):
            pyc.unlink()


def _run_patch(root: Path, patch_file: Path, name: str) -> str:
    try:
        proc = gnu_patch(root, patch_file)
    except FileNotFoundError:
        raise OverlayError("GNU patch is not installed (the `patch` command was not found)") from None
    except subprocess.TimeoutExpired as e:
        raise PatchError(f"patch {name!r} timed out after {PATCH_TIMEOUT_S} s", patch_name=name,
                         output=str(e.output or "")) from None
    out = proc.stdout or ""
    if len(out) > _OUTPUT_MAX:
        out = out[:_OUTPUT_MAX] + f"\n... [{len(out) - _OUTPUT_MAX} more chars]"
    if proc.returncode != 0:
        first = next((l for l in out.splitlines() if "FAILED" in l or "error" in l.lower()
                      or "Reversed" in l or "can't find" in l.lower()), out.strip().splitlines()[-1:] or [""])
        if isinstance(first, list):
            first = first[0] if first else ""
        raise PatchError(f"patch {name!r} does not apply to the installed {PACKAGE} "
                         f"(GNU patch exit {proc.returncode}): {first.strip()}", patch_name=name, output=out)
    return out


def _read_marker(dest: Path) -> dict | None:
    try:
        data = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def build_overlay(patches: list[dict], dest: Path, package_root: Path | None = None) -> Path:
    """Build (or reuse) the overlay DEST with DEST/vllm = installed vLLM + PATCHES. Returns DEST.

    PATCHES: [{"name": str, "content": unified diff}], applied in order. Raises OverlayError
    for an unsafe or unsupported patch (before anything is written) and PatchError when a
    patch does not apply (nothing is left at DEST). If DEST already holds a complete overlay
    of the same key it is reused; one of another key is an error (never overwritten).
    """
    patches = _normalize_patches(patches)
    dest = Path(dest).absolute()
    root = Path(package_root).resolve() if package_root else installed_package_root()
    if not (root / "__init__.py").is_file():
        raise OverlayError(f"{root} is not a Python package (no __init__.py)")
    # 1. validate every patch before touching the file system
    plan: list[tuple[dict, dict[str, str]]] = []
    for p in patches:
        plan.append((p, patch_targets(p["content"], p["name"])))
    key = overlay_key(patches, root)
    # 2. reuse
    if dest.exists():
        marker = _read_marker(dest)
        if marker and marker.get("key") == key and (dest / PACKAGE).is_dir():
            return dest
        raise OverlayError(f"{dest} exists and is not an overlay of this patch set (key {key[:12]}); "
                           "remove it or choose another destination")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # 3. build into a temporary directory beside DEST, rename at the end
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the overlay from other users
        pkg = tmp / PACKAGE
        pkg.mkdir()
        n_links = symlink_farm(root, pkg)
        applied = _apply_patches(tmp, plan)
        (tmp / MARKER).write_text(json.dumps({
            "key": key, "package_root": str(root), "version": package_version(root),
            "patches": applied, "links": n_links}, indent=1), encoding="utf-8")
        return _publish(tmp, dest, key)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _apply_patches(tmp: Path, plan: list[tuple[dict, dict[str, str]]]) -> list[dict]:
    """Apply each patch of PLAN in order inside the symlink farm at TMP; what each changed."""
    applied = []
    for p, targets in plan:
        for rel, action in targets.items():
            if action != "create" or (tmp / rel).exists() or (tmp / rel).is_symlink():
                materialize(tmp, rel, "modify" if (tmp / rel).exists() or (tmp / rel).is_symlink()
                             else action)
            else:
                materialize(tmp, rel, "create")
        pfile = tmp / f".patch-{len(applied)}.diff"
        pfile.write_text(p["content"], encoding="utf-8")
        out = _run_patch(tmp, pfile, p["name"])
        pfile.unlink()
        applied.append({"name": p["name"], "sha256": hashlib.sha256(p["content"].encode()).hexdigest(),
                        "files": sorted(targets), "output": out.strip()})
    return applied


def _publish(tmp: Path, dest: Path, key: str) -> Path:
    """Rename the finished overlay TMP to DEST; one built at the same time by another process
    with the same key is used instead."""
    try:
        os.rename(tmp, dest)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):  # built concurrently by another process
            marker = _read_marker(dest)
            if marker and marker.get("key") == key:
                shutil.rmtree(tmp, ignore_errors=True)
                return dest
        raise
    return dest


def cached_overlay(patches: list[dict], cache_dir: Path, package_root: Path | None = None) -> Path:
    """The overlay of PATCHES under CACHE_DIR/<key prefix>, built once per installation+patch set."""
    key = overlay_key(patches, package_root)
    return build_overlay(patches, Path(cache_dir) / f"vllm-{key[:32]}", package_root)


def overlay_env(overlay: Path, base_env: dict[str, str] | None = None) -> dict[str, str]:
    """{"PYTHONPATH": OVERLAY + existing PYTHONPATH}: the entry to put into EngineSpec.env.

    BASE_ENV (default os.environ) supplies the existing PYTHONPATH, since EngineSpec.env
    replaces, not extends, the inherited value."""
    base = os.environ if base_env is None else base_env
    existing = base.get("PYTHONPATH", "")
    return {"PYTHONPATH": str(Path(overlay).absolute()) + (os.pathsep + existing if existing else "")}
