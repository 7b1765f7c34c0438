"""A probe that lives in the tests only, to show that a probe is a plug-in: loaded through
BENCH_PROBE_MODULES=tests.runners.probes.sample_probe by the GPU worker (which runs it) and the
web side (which labels its metric), with no edit to any product file.

It times one GET /health of the running engine."""
import json
import time

import httpx

from runners.contract import ArtifactRef, Measurement, Metric
from runners.probes.registry import ProbeBase, ProbeContext, ProbeOutput, register

HEALTH_MS = "sample_health_ms"


class SampleHealthProbe(ProbeBase):
    name, stage, phase = "sample_health", "engine", "probing health (sample)"
    metrics = (Metric(HEALTH_MS, "ms", "lower", "engine health check (sample probe)"),)

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        started = time.perf_counter()
        status = httpx.get(f"{ctx.base_url}/health", timeout=ctx.timeout_s).status_code
        ms = (time.perf_counter() - started) * 1000
        doc = {"status": status, "ms": ms, "served_model": ctx.served_model}
        return ProbeOutput(measurements=[Measurement.of(HEALTH_MS, ms, details={"status": status})],
                           artifacts=[ArtifactRef(kind="probe_json", name="sample_health.json", content=json.dumps(doc))],
                           notes=[f"health answered {status}"], raw=doc)


PROBE = register(SampleHealthProbe())
