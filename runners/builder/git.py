"""Git on the worker: one bare mirror per repository (cloned once, then fetched), ref
resolution to a full SHA, the files a commit changes, and file contents at a commit.

Every command is an argv list (never a shell); URLs and refs are checked by runners.contract
before any git process starts, refs are passed after `--end-of-options`, and
GIT_ALLOW_PROTOCOL limits the transports git may use (file only when the worker allows it).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
import io
from pathlib import Path

from ..contract import SpecError, check_ref, check_repo_url, is_full_sha
from .errors import BuildFailure

OUTPUT_MAX = 4000


class Git:
    """Runs git with a fixed, non-interactive environment and records every command in LOG."""

    def __init__(self, *, allow_file: bool, timeout_s: float, log: list[str]):
        self.allow_file, self.timeout_s, self.log = allow_file, timeout_s, log
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": "https:ssh" + (":file" if allow_file else ""),
            "LC_ALL": "C",
        }

    def run(self, *args: str, git_dir: Path | None = None, binary: bool = False) -> subprocess.CompletedProcess:
        cmd = ["git", *(["--git-dir", str(git_dir)] if git_dir else []), *args]
        self.log.append("$ " + " ".join(cmd))
        try:
            proc = subprocess.run(cmd, capture_output=True, env=self.env, timeout=self.timeout_s, text=not binary)
        except subprocess.TimeoutExpired:
            raise BuildFailure(f"git {args[0]} timed out after {self.timeout_s:.0f} s") from None
        if proc.returncode != 0:
            err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(errors="replace")
            self.log.append(err[-OUTPUT_MAX:])
            raise BuildFailure(f"git {args[0]} failed (exit {proc.returncode}): {err.strip()[-OUTPUT_MAX:]}")
        return proc


class Mirror:
    """The bare mirror of one repository under CACHE_DIR/git/<hash of the URL>.git."""

    def __init__(self, url: str, cache_dir: Path, git: Git):
        self.url = check_repo_url(url, allow_file=git.allow_file)
        self.git = git
        name = hashlib.sha256(self.url.encode()).hexdigest()[:20]
        self.path = Path(cache_dir) / "git" / f"{name}.git"

    def ensure(self) -> bool:
        """Clone once (--mirror); True when it was cloned now."""
        if (self.path / "HEAD").is_file():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".tmp-{os.getpid()}")
        self.git.run("clone", "--mirror", "--quiet", "--", self.url, str(tmp))
        os.replace(tmp, self.path)
        return True

    def fetch(self) -> None:
        self.git.run("fetch", "--prune", "--quiet", "origin", git_dir=self.path)

    def _rev_parse(self, ref: str) -> str | None:
        try:
            out = self.git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}",
                               git_dir=self.path).stdout.strip()
        except BuildFailure:
            return None
        return out if is_full_sha(out) else None

    def resolve(self, ref: str) -> str:
        """REF (branch, tag, commit, short SHA) to a full SHA. A full SHA already in the mirror
        needs no fetch (the warm path); anything else is fetched first (branches move)."""
        try:
            check_ref(ref)
        except SpecError as exc:
            raise BuildFailure(str(exc)) from None
        cloned = self.ensure()
        if is_full_sha(ref) and self._rev_parse(ref):
            return ref
        if not cloned:
            self.fetch()
        sha = self._rev_parse(ref)
        if sha is None:
            raise BuildFailure(f"ref {ref!r} not found in {self.url}")
        return sha

    def merge_base(self, ref: str, branch: str) -> str:
        """The best common ancestor of REF (a PR's head) and BRANCH's tip, fetched now: what the PR
        merges into, not the branch as it has moved on since."""
        head = self.resolve(ref)
        tip = self.resolve(f"refs/heads/{branch.removeprefix('refs/heads/')}")
        out = self.git.run("merge-base", "--end-of-options", head, tip, git_dir=self.path).stdout.strip()
        if not is_full_sha(out):
            raise BuildFailure(f"{ref[:12]} and {branch!r} have no common ancestor in {self.url}")
        return out

    def lineage(self, commit: str, ref: str = "") -> dict:
        """Where COMMIT sits in history, for the web side (which has no git): its first parent
        ("" for a root commit), its depth along first parents (orders a branch's commits), and
        REF as `branch` when REF names a branch here (not a tag, not a commit). {} without a mirror."""
        if not (self.path / "HEAD").is_file():
            return {}
        info = {"parent": self._rev_parse(f"{commit}^1") or ""}
        try:
            count = self.git.run("rev-list", "--first-parent", "--count", commit, "--", git_dir=self.path).stdout
            info["first_parent_depth"] = int(count.strip())
        except (BuildFailure, ValueError):
            pass
        name = ref.removeprefix("refs/heads/")
        if name and not is_full_sha(name) and self._rev_parse(f"refs/heads/{name}") \
                and not self._rev_parse(f"refs/tags/{name}"):
            info["branch"] = name
        return info

    def changed_files(self, base: str, commit: str) -> list[tuple[str, str]]:
        """[(status A|M|D|T, path)] between two commits, renames split into D + A."""
        out = self.git.run("diff", "--name-status", "--no-renames", "-z", base, commit, "--",
                           git_dir=self.path).stdout
        fields = out.split("\0")
        return [(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def read_files(self, commit: str, paths: list[str]) -> dict[str, bytes]:
        """{path: bytes} of PATHS at COMMIT, in one `git archive`."""
        if not paths:
            return {}
        data = self.git.run("archive", "--format=tar", commit, "--", *paths, git_dir=self.path, binary=True).stdout
        files = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    files[member.name] = tar.extractfile(member).read()
        return files

    def export(self, commit: str, dest: Path) -> None:
        """The whole tree at COMMIT into DEST (for a source build)."""
        data = self.git.run("archive", "--format=tar", commit, git_dir=self.path, binary=True).stdout
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
