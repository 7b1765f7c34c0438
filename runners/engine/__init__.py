"""The engine: `vllm serve` in its own process group under a guard, its arguments validated.

args.py: EngineSpec and the flag/env checks; cpu.py: CPU build and thread binding;
guard.py: the group-leading guard and process-group signals; process.py: the Engine.
"""
from runners.engine.args import (  # noqa: F401
    MANAGED_FLAGS, EngineSpec, default_vllm_command, validate_args, validate_env,
)
from runners.engine.cpu import cpu_thread_binding, is_cpu_build  # noqa: F401
from runners.engine.process import Engine, EngineError, free_port  # noqa: F401

__all__ = ["MANAGED_FLAGS", "Engine", "EngineError", "EngineSpec", "cpu_thread_binding", "default_vllm_command",
           "free_port", "is_cpu_build", "validate_args", "validate_env"]
