"""What the engine is asked to run: EngineSpec and the checks on its flags and environment.

Engine flags are long flags only (`--flag`, `--flag=value`, `--flag value`), one line each;
the flags the Engine sets from EngineSpec fields (MANAGED_FLAGS) may not be repeated.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from runners.flags import flag_name

DEFAULT_VLLM_MODULE = "vllm.entrypoints.cli.main"
ENV_KEY_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
FLAG_NAME_RE = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_.-]*")
NEGATIVE_NUMBER_RE = re.compile(r"-\d+(\.\d+)?([eE][-+]?\d+)?")
# Set by the Engine from EngineSpec fields; a flag in EngineSpec.args may not repeat them.
MANAGED_FLAGS = ("--host", "--port", "--served-model-name", "--tensor-parallel-size", "--model")


@dataclass
class EngineSpec:
    model: str
    served_model_name: str = "bench-model"
    tensor_parallel_size: int = 1
    args: list[str] = field(default_factory=list)  # extra flags (benchmark + variant)
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port is picked
    startup_timeout_s: float = 600.0
    stop_timeout_s: float = 15.0
    log_path: Path | None = None  # None: a temporary file (kept; see Engine.log_path)
    vllm_command: list[str] | None = None  # None: RunnerConfig's (BENCH_VLLM_COMMAND), else python -m vllm...
    cpu: bool | None = None  # None: RunnerConfig's (BENCH_ENGINE_CPU: 1/0/auto)

    def __post_init__(self) -> None:
        validate_args(self.args)
        validate_env(self.env)
        _check_one_line("model", self.model)
        _check_one_line("served_model_name", self.served_model_name)
        if not _is_int(self.tensor_parallel_size) or self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be an integer >= 1, got {self.tensor_parallel_size!r}")
        if self.port is not None and (not _is_int(self.port) or not 0 < self.port < 65536):
            raise ValueError(f"port must be None or an integer in 1..65535, got {self.port!r}")
        if self.vllm_command is not None and not _is_command(self.vllm_command):
            raise ValueError(f"vllm_command must be a non-empty list of strings, got {self.vllm_command!r}")
        if self.log_path is not None:
            self.log_path = Path(self.log_path)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_command(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(a, str) and a and not bad_chars(a) for a in value)


def _check_one_line(name: str, value) -> None:
    if not isinstance(value, str) or not value or bad_chars(value):
        raise ValueError(f"{name} must be a non-empty string without NUL or newlines, got {value!r}")


def bad_chars(s: str) -> bool:
    return "\0" in s or "\n" in s or "\r" in s


def validate_args(args) -> None:
    """Raise ValueError unless ARGS is a list of `--flag`, `--flag=value` or `--flag value` strings.

    A value is one string right after a `--flag` (not after `--flag=value`); it may begin
    with "-" only as a negative number. Short flags (`-tp`, `-O3`), positionals, NUL and newlines
    are refused, and so are the flags the Engine sets itself (MANAGED_FLAGS).
    """
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise ValueError(f"engine args must be a list of strings, got {type(args).__name__}: {args!r}")
    value_allowed = False
    for i, a in enumerate(args):
        if not isinstance(a, str):
            raise ValueError(f"engine args must be strings; item {i} is {type(a).__name__}: {a!r}")
        if bad_chars(a):
            raise ValueError(f"engine arg {i} contains NUL or a newline: {a!r}")
        if a.startswith("--") and len(a) > 2:
            _check_flag(i, a)
            value_allowed = "=" not in a
        elif a == "--":
            raise ValueError(f"engine arg {i}: a bare '--' is not allowed")
        elif a.startswith("-") and not NEGATIVE_NUMBER_RE.fullmatch(a):
            raise ValueError(f"engine arg {i} {a!r}: use long flags (--name), not short ones")
        elif value_allowed:
            value_allowed = False
        elif a.startswith("-"):
            raise ValueError(f"engine arg {i} {a!r}: use long flags (--name), not short ones")
        else:
            raise ValueError(
                f"engine arg {i} {a!r} is neither a --flag nor a value right after one "
                "(write --flag=value for a flag that takes several values)"
            )


def _check_flag(i: int, arg: str) -> None:
    if not FLAG_NAME_RE.fullmatch(arg.split("=", 1)[0]):
        raise ValueError(f"engine arg {i} is not a valid flag name: {arg!r}")
    if flag_name(arg) in MANAGED_FLAGS:  # vLLM reads --a_b as --a-b
        raise ValueError(f"engine arg {arg!r} is set by the engine runner; use the EngineSpec field instead")


def validate_env(env) -> None:
    """Raise ValueError unless ENV maps NAME ([A-Z_][A-Z0-9_]*) to a one-line string."""
    if not isinstance(env, dict):
        raise ValueError(f"engine env must be a dict of strings, got {type(env).__name__}")
    for k, v in env.items():
        if not isinstance(k, str) or not ENV_KEY_RE.match(k):
            raise ValueError(f"engine env name {k!r} must match {ENV_KEY_RE.pattern}")
        if not isinstance(v, str):
            raise ValueError(f"engine env {k} must be a string, got {type(v).__name__}: {v!r}")
        if bad_chars(v):
            raise ValueError(f"engine env {k} contains NUL or a newline")


def default_vllm_command(configured: tuple[str, ...] | list[str] = ()) -> list[str]:
    """CONFIGURED (RunnerConfig.vllm_command: BENCH_VLLM_COMMAND split with shlex), else this
    interpreter's `python -m vllm...`."""
    if configured:
        return list(configured)
    return [sys.executable, "-m", DEFAULT_VLLM_MODULE]
