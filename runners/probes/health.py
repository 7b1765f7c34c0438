"""Host health check before a batch: one allreduce latency figure from the comm probe
(runners/probes/comm/sweep.py), NCCL over the host's GPUs or gloo over two CPU processes. The
web side keeps the figures per host and flags a host whose latency drifted from its own
history, so that a slow interconnect is not blamed on a commit.

Its settings are RunnerConfig's (runners/config.py):
    comm_health_check  BENCH_COMM_HEALTH_CHECK = auto (default: on with 2 or more GPUs, off on CPU) | 1 | 0
    comm_health_bytes  BENCH_COMM_HEALTH_BYTES = 1048576 (the allreduce size timed)

    check = BatchHealthCheck()
    doc = check.before_run("9f1c...", config)   # the figure, or None (off, or this batch was checked)
"""
from __future__ import annotations

import time

from runners.config import HEALTH_BYTES_DEFAULT, RunnerConfig
from runners.hostinfo import host_info
from runners.probes.comm.sweep import run_sweep

ITERS, WARMUP, TIMEOUT_S = 50, 5, 300.0


def enabled(config: RunnerConfig, info: dict | None = None) -> bool:
    if config.comm_health_check is not None:
        return config.comm_health_check
    return (info or host_info()).get("gpu_count", 0) >= 2


def allreduce_check(nbytes: int = HEALTH_BYTES_DEFAULT, *, backend: str = "auto", iters: int = ITERS) -> dict:
    """One allreduce size timed with the comm probe: {'allreduce_us', 'bytes', 'backend',
    'world_size', 'hostname', 'elapsed_s', 'error'}. A failed probe is a figure too (error set)."""
    started = time.monotonic()
    doc = {"hostname": host_info()["hostname"], "bytes": nbytes, "backend": backend, "world_size": 0,
           "allreduce_us": None, "error": ""}
    try:
        sweep = run_sweep(backend=backend, sizes=[nbytes], dtype="fp32", iters=iters, warmup=WARMUP, graph=False,
                          timeout_s=TIMEOUT_S)
    except Exception as exc:  # the health check must never cost the run
        doc["error"] = f"{type(exc).__name__}: {exc}"[:500]
    else:
        doc.update(backend=sweep["backend"], world_size=sweep["world_size"])
        rows = [r for r in sweep["results"] if r["bytes"] == nbytes and r["mode"] == "eager"]
        if rows:
            doc["allreduce_us"] = rows[0]["us"]
        else:
            doc["error"] = "; ".join(sweep["notes"])[:500] or "the probe returned no figure"
    doc["elapsed_s"] = round(time.monotonic() - started, 2)
    return doc


class BatchHealthCheck:
    """Runs the check once per batch in a worker process (the first run of a batch pays for it)."""

    def __init__(self, check=allreduce_check):
        self.check = check
        self.last_batch = None

    def enabled_for(self, batch: str, config: RunnerConfig) -> bool:
        """Whether `before_run(batch, config)` would run the probe."""
        return bool(batch) and batch != self.last_batch and enabled(config)

    def before_run(self, batch: str, config: RunnerConfig) -> dict | None:
        if not self.enabled_for(batch, config):
            return None
        self.last_batch = batch
        return {**self.check(config.comm_health_bytes), "batch": batch}
