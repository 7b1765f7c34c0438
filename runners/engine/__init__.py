"""The engine: `vllm serve` in its own process group under a guard, its arguments validated."""
from runners.engine.process import (  # noqa: F401
    Engine, EngineError, EngineSpec, cpu_thread_binding, default_vllm_command, free_port, is_cpu_build,
    validate_args, validate_env,
)
