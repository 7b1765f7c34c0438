"""Host health check before a batch: one allreduce latency figure from the comm probe
(runners/probes/comm.py), NCCL over the host's GPUs or gloo over two CPU processes. The web side
keeps the figures per host and flags a host whose latency drifted from its own history, so that a
slow interconnect is not blamed on a commit.

    BENCH_COMM_HEALTH_CHECK = auto (default: on with 2 or more GPUs, off on CPU) | 1 | 0
    BENCH_COMM_HEALTH_BYTES = 1048576 (the allreduce size timed)

    check = BatchHealthCheck()
    doc = check.before_run(batch="9f1c...")   # the figure, or None (off, or this batch was checked)
"""
from __future__ import annotations

import os
import time

from runners.hostinfo import host_info

ENABLE_ENV, BYTES_ENV = "BENCH_COMM_HEALTH_CHECK", "BENCH_COMM_HEALTH_BYTES"
DEFAULT_BYTES = 1 << 20  # 1 MiB: latency and bandwidth both show; a decode step's KBs are noise-bound on CPU
ITERS, WARMUP, TIMEOUT_S = 50, 5, 300.0


class HealthConfigError(ValueError):
    """A bad BENCH_COMM_HEALTH_* value (the message names it)."""


def enabled(info: dict | None = None) -> bool:
    value = os.environ.get(ENABLE_ENV, "auto").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    if value != "auto":
        raise HealthConfigError(f"{ENABLE_ENV}={value!r}: use auto, 1 or 0")
    return (info or host_info()).get("gpu_count", 0) >= 2


def check_bytes() -> int:
    raw = os.environ.get(BYTES_ENV, str(DEFAULT_BYTES))
    try:
        size = int(raw)
    except ValueError:
        raise HealthConfigError(f"{BYTES_ENV}={raw!r} is not a whole number of bytes") from None
    if size < 4 or size % 4:
        raise HealthConfigError(f"{BYTES_ENV}={size}: a positive multiple of 4 bytes (float32 elements)")
    return size


def allreduce_check(*, nbytes: int | None = None, backend: str = "auto", iters: int = ITERS) -> dict:
    """One allreduce size timed with the comm probe: {'allreduce_us', 'bytes', 'backend',
    'world_size', 'hostname', 'elapsed_s', 'error'}. A failed probe is a figure too (error set)."""
    from runners.probes.comm import run_sweep

    nbytes = nbytes or check_bytes()
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

    def enabled_for(self, batch: str) -> bool:
        """Whether `before_run(batch)` would run the probe (HealthConfigError on a bad setting)."""
        return bool(batch) and batch != self.last_batch and enabled()

    def before_run(self, batch: str) -> dict | None:
        if not self.enabled_for(batch):
            return None
        self.last_batch = batch
        return {**self.check(), "batch": batch}
