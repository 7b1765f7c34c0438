"""The memory-bandwidth floor at a workload point: weight bytes plus every stream's KV cache."""
import pytest

from runners.analysis.floor import kv_bytes_per_token, mean_context, point_floor

LLAMA_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
            "torch_dtype": "bfloat16"}


def test_kv_bytes_per_token_for_gqa_mla_and_the_cache_dtype():
    assert kv_bytes_per_token(LLAMA_8B) == 2 * 32 * 8 * 128 * 2 == 131072  # K and V, 8 heads of 128, bf16
    assert kv_bytes_per_token(LLAMA_8B, tensor_parallel_size=2) == 65536
    assert kv_bytes_per_token(LLAMA_8B, tensor_parallel_size=16) == 2 * 32 * 1 * 128 * 2  # a head replicated
    assert kv_bytes_per_token(LLAMA_8B, kv_cache_dtype="fp8") == 65536
    mla = {"num_hidden_layers": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"}
    assert kv_bytes_per_token(mla, tensor_parallel_size=2) == 4 * (512 + 64) * 2  # the latent, whole on each rank
    assert kv_bytes_per_token({"num_hidden_layers": 2}) is None
    assert kv_bytes_per_token({**LLAMA_8B, "torch_dtype": "int3"}) is None


def test_the_floor_grows_with_streams_and_context():
    alone = point_floor(weight_bytes=16e9, kv_bytes_per_token=131072, bandwidth_gb_s=4000, concurrency=1,
                        context_tokens=mean_context(128, 128), step_ms=5.0)
    assert alone["weight_ms"] == pytest.approx(4.0) and alone["kv_ms"] == pytest.approx(192 * 131072 / 4e9)
    assert alone["share"] == pytest.approx(alone["floor_ms"] / 5.0)
    many = point_floor(weight_bytes=16e9, kv_bytes_per_token=131072, bandwidth_gb_s=4000, concurrency=16,
                       context_tokens=mean_context(32768, 128))
    assert many["kv_ms"] == pytest.approx(16 * 32832 * 131072 / 4e9) and many["share"] is None
    assert many["floor_ms"] > 4 * alone["floor_ms"]
    weights_only = point_floor(weight_bytes=16e9, kv_bytes_per_token=None, bandwidth_gb_s=4000, concurrency=4,
                               context_tokens=100)
    assert weights_only["kv_ms"] is None and weights_only["floor_ms"] == pytest.approx(4.0)
    assert mean_context(None, 256) == 128


def test_the_weights_probe_reports_kv_bytes_from_the_config_and_the_cache_dtype(tmp_path):
    import json

    from runners.contract import JobSpec
    from runners.probes.weights_probe import WeightsProbe
    from runners.probes.registry import ProbeContext

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 4096)
    spec = JobSpec.from_dict({"model": str(tmp_path), "prompt": "hi", "max_tokens": 4, "repeats": 1,
                              "tensor_parallel_size": 2})
    ctx = ProbeContext(spec=spec, work_dir=tmp_path, engine_args=["--kv-cache-dtype", "fp8"], engine_env={},
                       model_config=LLAMA_8B)
    figures = {m.metric: m.value for m in WeightsProbe().run(ctx).measurements}
    assert figures["kv_bytes_per_token"] == 2 * 32 * 4 * 128 * 1  # 4 of 8 KV heads a rank, fp8
    assert "weight_bytes_per_gpu" in figures
