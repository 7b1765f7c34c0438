"""runners.builder.overlay: patch an installed vLLM through a symlink farm, never touching it."""
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runners.builder.overlay import (MARKER, OverlayError, PatchError, build_overlay, cached_overlay,
                             installed_package_root, overlay_env, overlay_key, patch_targets)

HERE = Path(__file__).parent
HARMLESS = HERE / "harmless_comment.patch"
CORRUPT = HERE / "corrupt_rmsnorm.patch"
LAYERNORM = "vllm/model_executor/layers/layernorm.py"


@pytest.fixture
def fake_vllm(tmp_path) -> Path:
    """A small stand-in for an installed vllm package (fast; the real one has ~6000 files)."""
    root = tmp_path / "site" / "vllm"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from vllm._version import __version__\n")
    (root / "_version.py").write_text("__version__ = version = '9.9.9'\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "mod.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (root / "data.txt").write_text("payload\n")
    for p in root.rglob("*"):
        os.chmod(p, 0o555 if p.is_dir() else 0o444)  # an installation we may not write to
    os.chmod(root, 0o555)
    yield root
    for p in [root, *root.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


MOD_PATCH = """diff --git a/vllm/sub/mod.py b/vllm/sub/mod.py
--- a/vllm/sub/mod.py
+++ b/vllm/sub/mod.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 41
"""


def patch(name, content):
    return {"name": name, "content": content}


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def test_overlay_on_fake_package(fake_vllm, tmp_path):
    before = tree_digest(fake_vllm)
    dest = build_overlay([patch("mod", MOD_PATCH)], tmp_path / "ov" / "o1", package_root=fake_vllm)
    mod = dest / "vllm/sub/mod.py"
    assert not mod.is_symlink() and "return 41" in mod.read_text()
    assert (dest / "vllm/data.txt").is_symlink() and (dest / "vllm/data.txt").read_text() == "payload\n"
    assert (dest / "vllm/sub").is_dir() and not (dest / "vllm/sub").is_symlink()
    assert tree_digest(fake_vllm) == before  # the installation is untouched
    env = {**os.environ, **overlay_env(dest, base_env={"PYTHONPATH": str(fake_vllm.parent)})}
    assert env["PYTHONPATH"] == f"{dest}{os.pathsep}{fake_vllm.parent}"
    out = subprocess.run([sys.executable, "-c", "import vllm.sub.mod as m; print(m.f(), m.g(), m.__file__)"],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["41", "2"] and out[2].startswith(str(dest))
    assert leftovers(tmp_path / "ov") == ["o1"]


def test_same_patches_reuse_the_overlay(fake_vllm, tmp_path):
    ps = [patch("mod", MOD_PATCH)]
    first = cached_overlay(ps, tmp_path / "cache", package_root=fake_vllm)
    stamp = (first / MARKER).stat().st_mtime_ns
    again = cached_overlay([patch("renamed", MOD_PATCH)], tmp_path / "cache", package_root=fake_vllm)
    assert again == first and (first / MARKER).stat().st_mtime_ns == stamp
    assert overlay_key(ps, fake_vllm) in (first / MARKER).read_text()
    other = cached_overlay([patch("mod", MOD_PATCH.replace("41", "42"))], tmp_path / "cache", package_root=fake_vllm)
    assert other != first and len(leftovers(tmp_path / "cache")) == 2
    with pytest.raises(OverlayError, match="not an overlay of this patch set"):
        build_overlay([patch("x", MOD_PATCH.replace("41", "43"))], first, package_root=fake_vllm)


@pytest.mark.parametrize("bad_path, message", [
    ("a/../evil.py", r"'\.\.'"),
    ("a/vllm/../../evil.py", r"'\.\.'"),
    ("/etc/passwd", "absolute"),
    ("a/setup.py", "outside vllm/"),
])
def test_unsafe_paths_refused_before_anything_is_written(fake_vllm, tmp_path, bad_path, message):
    content = MOD_PATCH.replace("--- a/vllm/sub/mod.py", f"--- {bad_path}").replace(
        "+++ b/vllm/sub/mod.py", f"+++ {bad_path.replace('a/', 'b/', 1)}")
    with pytest.raises(OverlayError, match=message):
        build_overlay([patch("ok", MOD_PATCH), patch("evil", content)], tmp_path / "ov" / "o", package_root=fake_vllm)
    assert leftovers(tmp_path / "ov") == []  # not even the parent directory was created
    assert not (tmp_path / "evil.py").exists()


def test_header_lookalike_inside_a_hunk_is_not_a_header():
    content = """--- a/vllm/x.py
+++ b/vllm/x.py
@@ -1,3 +1 @@
 a = 1
--- b/../../etc/passwd
-+++ c
"""
    assert patch_targets(content) == {"vllm/x.py": "modify"}


def test_patch_that_does_not_apply_leaves_nothing(fake_vllm, tmp_path):
    stale = MOD_PATCH.replace("-    return 1", "-    return 7")
    dest = tmp_path / "ov" / "o"
    with pytest.raises(PatchError) as info:
        build_overlay([patch("good", MOD_PATCH), patch("stale.patch", stale)], dest, package_root=fake_vllm)
    e = info.value
    assert e.patch_name == "stale.patch" and "does not apply" in str(e)
    assert "FAILED" in e.output or "Reversed" in e.output, e.output
    assert leftovers(tmp_path / "ov") == []  # no overlay, no temp dir, no .rej/.orig
    # the same patch twice: the second is "reversed or already applied" (--forward) -> error
    with pytest.raises(PatchError):
        build_overlay([patch("a", MOD_PATCH), patch("b", MOD_PATCH)], dest, package_root=fake_vllm)
    assert leftovers(tmp_path / "ov") == []


def test_malformed_and_unsupported_patches(fake_vllm, tmp_path):
    with pytest.raises(PatchError, match="no unified-diff file header"):
        build_overlay([patch("empty", "hello\n")], tmp_path / "o", package_root=fake_vllm)
    with pytest.raises(OverlayError, match="no such file"):
        build_overlay([patch("missing", MOD_PATCH.replace("sub/mod.py", "sub/nope.py"))], tmp_path / "o",
                      package_root=fake_vllm)
    with pytest.raises(OverlayError, match="renames"):
        build_overlay([patch("ren", "rename from vllm/a.py\nrename to vllm/b.py\n" + MOD_PATCH)], tmp_path / "o",
                      package_root=fake_vllm)
    with pytest.raises(OverlayError, match="mode changes"):
        build_overlay([patch("chmod", "diff --git a/vllm/sub/mod.py b/vllm/sub/mod.py\nold mode 100644\n"
                                      "new mode 100755\n")], tmp_path / "o", package_root=fake_vllm)
    with pytest.raises(OverlayError, match="'..'"):
        build_overlay([patch("git", "diff --git a/vllm/../x.py b/vllm/../x.py\n" + MOD_PATCH)], tmp_path / "o",
                      package_root=fake_vllm)
    assert not (tmp_path / "o").exists()


def test_new_file_inside_the_package(fake_vllm, tmp_path):
    new = "--- /dev/null\n+++ b/vllm/sub/extra.py\n@@ -0,0 +1 @@\n+X = 5\n"
    dest = build_overlay([patch("new", new)], tmp_path / "o", package_root=fake_vllm)
    assert (dest / "vllm/sub/extra.py").read_text() == "X = 5\n"
    assert not (fake_vllm / "sub/extra.py").exists()


def test_harmless_patch_on_the_installed_vllm_imports(overlay_cache):
    """The real installed vLLM: the overlay's layernorm carries the comment, the rest is links,
    the installation is untouched, and `import vllm` in a child resolves to the overlay."""
    root = installed_package_root()
    original = (root / "model_executor/layers/layernorm.py").read_bytes()
    t0 = time.monotonic()
    dest = cached_overlay([patch("harmless", HARMLESS.read_text())], overlay_cache)
    built_s = time.monotonic() - t0
    target = dest / LAYERNORM
    assert not target.is_symlink() and "comment-only change" in target.read_text()
    assert (dest / "vllm/model_executor/layers/linear.py").is_symlink()
    assert (root / "model_executor/layers/layernorm.py").read_bytes() == original
    code = ("import vllm, inspect\n"
            "from vllm.model_executor.layers import layernorm\n"
            "print(vllm.__file__)\nprint(layernorm.__file__)\n"
            "print('comment-only change' in inspect.getsource(layernorm.RMSNorm))\n")
    env = {**os.environ, **overlay_env(dest)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()[-3:]
    assert lines[0] == str(dest / "vllm/__init__.py")
    assert lines[1] == str(target)
    assert lines[2] == "True"
    assert built_s < 60


def test_corrupting_patch_applies_to_the_installed_vllm(overlay_cache):
    dest = cached_overlay([patch("corrupt", CORRUPT.read_text())], overlay_cache)
    assert "return 2.0 * ir.ops.rms_norm(" in (dest / LAYERNORM).read_text()
