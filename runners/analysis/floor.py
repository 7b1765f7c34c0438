"""The memory-bandwidth floor of a decode step at a workload point: what each GPU must read per
step (its share of the weights once, plus every stream's KV cache so far) over the bandwidth a
copy benchmark measured on the worker. Pure: the model's config.json and the figures in.

    kv_bytes_per_token(config, tensor_parallel_size=2)        # 65536 for Llama-8B in bf16 at TP=2
    point_floor(weight_bytes=..., kv_bytes_per_token=..., bandwidth_gb_s=..., concurrency=16,
                context_tokens=8256, step_ms=7.1)
"""
from __future__ import annotations

DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1,
               "fp8_e5m2": 1}


def kv_bytes_per_token(config: dict, *, tensor_parallel_size: int = 1, kv_cache_dtype: str | None = None) -> int | None:
    """Bytes of KV cache each GPU reads per token of context in one decode step: K and V of every
    layer for its share of the KV heads (at least one head when TP exceeds them: vLLM replicates
    it), or, for MLA (DeepSeek-V3 / GLM family), the compressed latent plus the rope key, which
    every rank holds whole. None when the config lacks the sizes."""
    layers = config.get("num_hidden_layers")
    dtype = kv_cache_dtype if kv_cache_dtype not in (None, "", "auto") else config.get("torch_dtype", "bfloat16")
    size = DTYPE_BYTES.get(str(dtype).lower())
    if not layers or size is None:
        return None
    if config.get("kv_lora_rank"):
        return int(layers * (config["kv_lora_rank"] + config.get("qk_rope_head_dim", 0)) * size)
    heads, kv_heads = config.get("num_attention_heads"), config.get("num_key_value_heads") or config.get("num_attention_heads")
    hidden = config.get("hidden_size")
    head_dim = config.get("head_dim") or (hidden // heads if hidden and heads else None)
    if not kv_heads or not head_dim:
        return None
    per_gpu_heads = max(1, -(-kv_heads // max(1, tensor_parallel_size)))
    return int(2 * layers * per_gpu_heads * head_dim * size)


def mean_context(prompt_tokens: int | None, max_tokens: int) -> float:
    """A stream's context averaged over its decode steps: the prompt plus half the tokens it
    generates (a prompt of unknown length, the benchmark's text, counts as none)."""
    return (prompt_tokens or 0) + max_tokens / 2


def point_floor(*, weight_bytes: float, kv_bytes_per_token: float | None, bandwidth_gb_s: float, concurrency: int,
                context_tokens: float, step_ms: float | None = None) -> dict:
    """{weight_ms, kv_ms, floor_ms, share}: the floor's two parts and its share of the measured
    STEP_MS (None without it). Without KV bytes the floor is the weights' alone (kv_ms None)."""
    bytes_per_ms = bandwidth_gb_s * 1e9 / 1000.0
    weight_ms = weight_bytes / bytes_per_ms
    kv_ms = concurrency * context_tokens * kv_bytes_per_token / bytes_per_ms if kv_bytes_per_token else None
    floor_ms = weight_ms + (kv_ms or 0.0)
    return {"weight_ms": weight_ms, "kv_ms": kv_ms, "floor_ms": floor_ms,
            "share": floor_ms / step_ms if step_ms else None}
