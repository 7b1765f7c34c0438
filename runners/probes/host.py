"""How steady the host's CPU is while a decode is measured.

A launch-bound decode (eager, where the CPU issues every kernel of every step) runs at the
speed of the host's CPU, not of the code: on a shared H200 host a fixed Python loop took 66 ms
at one moment and 127 ms at another, and eager requests on one engine ranged 38-82 tok/s with
the engine's own ITL agreeing with the client's. So the decode probe samples the host before
each repeat: the time of a fixed loop (this core's speed now) and, where /proc/stat has it, the
CPU time the hypervisor stole since the last sample.
"""
from __future__ import annotations

import time
from pathlib import Path

LOOP_ITERATIONS = 200_000  # about 5-15 ms of one core
# When the repeats' rates spread beyond RATE_SPREAD_WARN (fastest / slowest - 1) and the host
# passed one of the other two limits, the probe's result says the host is why.
RATE_SPREAD_WARN = 0.05
LOOP_SPREAD_WARN = 0.25  # slowest / fastest loop - 1
STEAL_WARN = 0.05  # stolen share of CPU time over a repeat


def loop_ms() -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(LOOP_ITERATIONS):
        x += i & 7
    return (time.perf_counter() - t0) * 1e3


def cpu_jiffies(stat: Path = Path("/proc/stat")) -> tuple[int, int] | None:
    """(stolen, total) jiffies of all CPUs since boot, or None where /proc/stat is missing."""
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return (values[7] if len(values) > 7 else 0), sum(values)


def sample() -> dict:
    return {"loop_ms": loop_ms(), "jiffies": cpu_jiffies()}


def steal_between(a: dict, b: dict) -> float | None:
    """Share of CPU time stolen between two samples (None without /proc/stat or no time passed)."""
    if not a["jiffies"] or not b["jiffies"]:
        return None
    stolen, total = b["jiffies"][0] - a["jiffies"][0], b["jiffies"][1] - a["jiffies"][1]
    return stolen / total if total > 0 else None


def summary(samples: list[dict], rates: list[float]) -> dict:
    """The host over a measurement: loop time range, the largest stolen share between two
    consecutive samples, and `unsteady`, the reason, when the RATES of the repeats spread
    beyond RATE_SPREAD_WARN while either passed its limit (a CUDA-graph decode keeps its pace
    on an unsteady host: nothing to explain then)."""
    loops = [s["loop_ms"] for s in samples]
    steals = [x for a, b in zip(samples, samples[1:]) if (x := steal_between(a, b)) is not None]
    out = {"loop_ms_min": min(loops), "loop_ms_max": max(loops), "steal_max": max(steals) if steals else None,
           "unsteady": None}
    why = []
    if min(loops) > 0 and max(loops) / min(loops) - 1 > LOOP_SPREAD_WARN:
        why.append(f"a fixed loop took {min(loops):.1f}-{max(loops):.1f} ms")
    if steals and max(steals) > STEAL_WARN:
        why.append(f"the hypervisor took up to {max(steals):.0%} of the CPU time")
    spread = max(rates) / min(rates) - 1 if rates and min(rates) > 0 else 0.0
    if why and spread > RATE_SPREAD_WARN:
        out["unsteady"] = (f"the repeats spread by {spread:.0%} ({min(rates):.1f}-{max(rates):.1f} tok/s) while the "
                           "host's CPU speed varied (" + "; ".join(why) + "): a launch-bound (eager) decode follows "
                           "the host, not the code")
    return out
