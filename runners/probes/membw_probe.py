"""The membw probe as a plug-in: a device-to-device copy's bandwidth before the engine starts,
the memory-bandwidth floor of a decode step (measured by runners.probes.membw)."""
from __future__ import annotations

from runners.contract import MEM_BANDWIDTH_GB_S, Metric, measurement

from . import membw
from .probe_kit import secondary, typed
from .registry import ProbeBase, ProbeContext, ProbeOutput, register

# The memory-bandwidth floor of a decode step: the weights each GPU reads per token
# (runners.probes.weights_probe) over the bandwidth a copy benchmark measured on the worker.
METRICS = (Metric(MEM_BANDWIDTH_GB_S, "GB/s", "none", "device memory bandwidth (copy benchmark)"),)


def bandwidth_measurements(bandwidth: dict | None) -> list[dict]:
    """The copy bandwidth (GB/s), when its probe ran and did not fail."""
    if bandwidth and "error" not in bandwidth:
        return [measurement(MEM_BANDWIDTH_GB_S, bandwidth["bytes_per_s"] / 1e9, details=bandwidth)]
    return []


class MembwProbe(ProbeBase):
    """A device-to-device copy's bandwidth, before the engine starts: the memory-bandwidth
    floor of a decode step."""
    name, stage, phase = "membw", "before", "measuring memory bandwidth"
    metrics = METRICS

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        bandwidth = secondary(membw.copy_bandwidth_isolated)
        return ProbeOutput(measurements=typed(bandwidth_measurements(bandwidth)), raw=bandwidth)


PROBE = register(MembwProbe())
