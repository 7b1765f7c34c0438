"""From a job's engine source and patches to an environment that starts that engine.

    prepared = prepare_engine(spec, config)   # raises BuildFailure (kind "build" | "patch")
    env.update(prepared.env)                  # PYTHONPATH of the overlay or source build
    result["build"] = prepared.info           # path, commit, version, duration, cache hit

Paths: "installed" (the worker's vLLM as is), "overlay" (installed + a commit's Python files
+ patches, see python_overlay), "source" (a configured source build, when the commit changes
compiled sources). The web side has no git: a ref is resolved here and reported back.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import JobSpec, SpecError
from . import overlay, packages
from .cache import BuildCache, build_key
from .config import BuildConfig
from .errors import BuildFailure
from .git import Git, Mirror
from .patches import patch_failure
from .python_overlay import build_commit_overlay, classify
from .source import source_build


@dataclass
class PreparedEngine:
    pythonpath: str = ""  # the overlay or source build to put first on PYTHONPATH ("" = installed)
    info: dict = field(default_factory=dict)
    log: str = ""


def package_commit(package_root: Path) -> str:
    """The commit the installed package records (`__commit_id__`), or ""."""
    try:
        text = (package_root / "_version.py").read_text(errors="replace")
    except OSError:
        return ""
    m = re.search(r"""^__commit_id__\s*=\s*(?:commit_id\s*=\s*)?['"]([0-9a-f]{7,40})['"]""", text, re.M)
    return m.group(1) if m else ""


class _Builder:
    def __init__(self, spec: JobSpec, config: BuildConfig, report, log: list[str] | None = None):
        self.spec, self.config, self.report = spec, config, report
        self.log: list[str] = log if log is not None else []
        self.root = Path(config.package_root or overlay.installed_package_root()).resolve()
        self.version = overlay.package_version(self.root)
        self.cache = BuildCache(config.cache_dir, config.cache_max_bytes)
        self.patches = [{"name": p.name, "content": p.content} for p in spec.patches]
        self.patch_hashes = [p.sha256 for p in spec.patches]
        self.lineage: dict = {}  # a git commit's parent, first-parent depth and branch (Mirror.lineage)

    def info(self, path: str, commit: str, **extra) -> dict:
        return {"path": path, "repo": self.spec.engine.repo, "ref": self.spec.engine.ref, "commit": commit,
                "engine_version": self.version, "patches": self.patch_hashes, **self.lineage, **extra}

    def store(self, key: str, build) -> dict:
        self.log.append(f"build cache miss {key[:16]}: building")
        record = self.cache.put(key, build)
        evicted = self.cache.evict(keep=key)
        if evicted:
            self.log.append(f"evicted from the build cache (least recently used): {', '.join(evicted)}")
        return record

    def installed(self) -> PreparedEngine:
        commit = package_commit(self.root)
        if not self.patches:
            return PreparedEngine("", self.info("installed", commit, cache_hit=True))
        key = build_key(repo="", commit=commit, patch_hashes=self.patch_hashes, base_version=self._base_version(commit))

        def build(tmp: Path) -> dict:
            try:
                overlay.build_overlay(self.patches, tmp / "tree", self.root)
            except overlay.PatchError as exc:
                self.log.append(exc.output)
                raise patch_failure(exc.patch_name or "patch", self._content(exc.patch_name), exc.output) from None
            except overlay.OverlayError as exc:
                raise BuildFailure(str(exc), kind="patch") from None
            return {"path": "overlay", "sub": "tree"}

        hit = self.cache.get(key)
        if hit:
            self.log.append(f"build cache hit {key[:16]}")
            return self._prepared(hit, commit, key, True)
        return self._prepared(self.store(key, build), commit, key, False)

    def _content(self, name: str | None) -> str:
        return next((p["content"] for p in self.patches if p["name"] == name), "")

    def _base_version(self, base_commit: str) -> str:
        return f"{self.version}@{self.root}@{base_commit}"

    def git(self) -> PreparedEngine:
        source = self.spec.engine
        git = Git(allow_file=self.config.allow_file_urls, timeout_s=self.config.git_timeout_s, log=self.log)
        try:
            mirror = Mirror(source.repo, self.config.cache_dir, git)
        except SpecError as exc:
            raise BuildFailure(str(exc)) from None
        self.report("resolving ref")
        if source.merge_base_with:
            self.report("resolving the merge base")
            commit = mirror.merge_base(source.ref or source.commit, source.merge_base_with)
        else:
            commit = source.commit or mirror.resolve(source.ref)
        self.lineage = mirror.lineage(commit, source.ref)
        try:
            return self._git_at(mirror, commit)
        except BuildFailure as exc:  # the run shows the commit it failed to build
            exc.commit = exc.commit or commit
            raise

    def _git_at(self, mirror: Mirror, commit: str) -> PreparedEngine:
        base_ref = package_commit(self.root) or self.config.base_ref
        key = build_key(repo=mirror.url, commit=commit, patch_hashes=self.patch_hashes,
                        base_version=self._base_version(base_ref))
        hit = self.cache.get(key)
        if hit:
            self.log.append(f"build cache hit {key[:16]} ({hit['path']})")
            return self._prepared(hit, commit, key, True)
        if not base_ref:
            raise BuildFailure("the installed engine records no commit and BENCH_VLLM_BASE_REF is not set: "
                               "cannot tell which files the commit changes")
        base = mirror.resolve(base_ref)
        changes = classify(mirror.changed_files(base, commit), self.root.name)
        self.log.append(f"base {base_ref} = {base}; {len(changes['package'])} package file(s) changed, "
                        f"{len(changes['compiled'])} compiled, {len(changes['other'])} outside the package")
        if changes["compiled"] and not self.config.source_build_command:
            shown = ", ".join(changes["compiled"][:10])
            raise BuildFailure(f"commit {commit[:12]} changes compiled sources ({shown}) and this worker has no "
                               "source build configured (BENCH_SOURCE_BUILD_COMMAND): refused")
        self.report("building engine")
        if changes["compiled"]:
            def build(tmp: Path) -> dict:
                prefix = source_build(mirror=mirror, commit=commit, patches=self.patches,
                                      command=self.config.source_build_command, dest=tmp, log=self.log,
                                      timeout_s=self.config.build_timeout_s, env=self.config.tool_env)
                built = prefix / self.root.name
                version = overlay.package_version(built) if built.is_dir() else ""
                return {"path": "source", "sub": "prefix", "engine_version": version, "base": base}
        elif changes["package"] or self.patches:
            def build(tmp: Path) -> dict:
                (tmp / "tree").mkdir()
                build_commit_overlay(mirror=mirror, commit=commit, package_changes=changes["package"],
                                     patches=self.patches, package_root=self.root, dest=tmp / "tree", log=self.log)
                return {"path": "overlay", "sub": "tree", "base": base}
        else:  # the base itself: the installed engine is that commit
            return PreparedEngine("", self.info("installed", commit, base_commit=base, cache_hit=True))
        return self._prepared(self.store(key, build), commit, key, False)

    def _prepared(self, record: dict, commit: str, key: str, hit: bool) -> PreparedEngine:
        info = self.info(record["path"], commit, cache_key=key, cache_hit=hit, base_commit=record.get("base", ""))
        if record.get("engine_version"):
            info["engine_version"] = record["engine_version"]
        return PreparedEngine(str(Path(record["dir"]) / record["sub"]), info)


def prepare_engine(spec: JobSpec, config: BuildConfig, report=lambda *a, **k: None,
                   log: list[str] | None = None) -> PreparedEngine:
    """Raises BuildFailure with the build log attached. LOG: a list the build appends its log
    lines to as it goes (runners.outputs.livelog reads it from another thread)."""
    started = time.monotonic()
    builder = _Builder(spec, config, report, log)
    try:
        prepared = builder.git() if spec.engine.kind == "git" else builder.installed()
        if spec.packages:
            report("installing packages")
            site = packages.install_packages(spec.packages, wheelhouse=config.wheelhouse, cache=builder.cache,
                                             log=builder.log)
            prepared.pythonpath = os.pathsep.join(p for p in (prepared.pythonpath, str(site)) if p)
            prepared.info["packages"] = list(spec.packages)
        packages.check_gguf_loader(spec.model, [p for p in prepared.pythonpath.split(os.pathsep) if p])
    except BuildFailure as exc:
        exc.log = "\n".join(builder.log)
        raise
    prepared.info["duration_s"] = round(time.monotonic() - started, 3)
    prepared.log = "\n".join(builder.log)
    return prepared
