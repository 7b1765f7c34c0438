"""The weights probe as a plug-in: the bytes each GPU reads per token, weights (from a local
model directory, runners.probes.membw) and KV cache per token of context (from its config.json,
runners.analysis.floor): the floor's bytes, in every job."""
from __future__ import annotations

from runners.analysis import floor
from runners.contract import KV_BYTES_PER_TOKEN, WEIGHT_BYTES_PER_GPU, Metric, measurement
from runners.flags import flag_value

from . import membw
from .probe_kit import typed
from .registry import ProbeBase, ProbeContext, ProbeOutput, register

METRICS = (
    Metric(WEIGHT_BYTES_PER_GPU, "B", "none", "weight bytes each GPU reads per token"),
    # ... plus, at a workload point, every stream's KV cache: bytes per token of context.
    Metric(KV_BYTES_PER_TOKEN, "B", "none", "KV-cache bytes each GPU reads per token of context"),
)


def weight_measurements(*, model: str, tensor_parallel_size: int) -> list[dict]:
    """The weight bytes per GPU, when the model is a local directory."""
    weights = membw.weight_bytes_per_gpu(model, tensor_parallel_size)
    if not weights:
        return []
    return [measurement(WEIGHT_BYTES_PER_GPU, weights,
                        details={"how": f"weight files of {model} / tensor parallel size {tensor_parallel_size}"})]


class WeightsProbe(ProbeBase):
    """The weight bytes each GPU reads per token, from a local model directory, and the KV-cache
    bytes per token of context from its config.json (every job): the floor's bytes."""
    name, stage, always = "weights", "after", True
    metrics = METRICS

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        tp = int(ctx.spec.tensor_parallel_size)
        found = weight_measurements(model=ctx.spec.model, tensor_parallel_size=tp)
        kv_dtype = flag_value(list(ctx.engine_args or ()), "--kv-cache-dtype")
        kv = floor.kv_bytes_per_token(ctx.model_config, tensor_parallel_size=tp, kv_cache_dtype=kv_dtype) \
            if ctx.model_config else None
        if kv:
            found.append(measurement(KV_BYTES_PER_TOKEN, kv, details={
                "how": f"K and V of every layer per token, config.json of {ctx.spec.model}, tensor parallel size "
                       f"{tp}, KV cache dtype {kv_dtype or 'the model dtype'}"}))
        return ProbeOutput(measurements=typed(found))


PROBE = register(WeightsProbe())
