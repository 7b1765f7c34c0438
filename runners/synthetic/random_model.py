"""Random-weight models of realistic shape, generated on the host itself (no hub).

Decode speed depends on shapes, not on weight values, so a Llama-3-8B-shaped model with
random weights measures what a real one would, and 7 B parameters are written in seconds
instead of downloaded. The tokenizer is copied from the tiny model (`runners tiny-model`).

    python -m runners random-model /models/llama-8b-shape --shape llama-8b --tokenizer-from var/tiny-model
    python -m runners random-model --config moe-mla-h200 /models/moe-mla [--layers N] [--weights]

`--config` takes an MoE + MLA config (a path, or a name in runners/synthetic/configs/) and
writes config.json, generation_config.json and the tokenizer; vLLM serves it with
`--load-format dummy`. `--weights` also writes random safetensors weights (moe_mla.py).
"""
import json
import shutil
import sys
from pathlib import Path

from . import moe_mla, tiny_model

SHAPES = {
    # hidden, layers, heads, kv heads, intermediate
    "llama-8b": (4096, 32, 32, 8, 14336),
    "llama-1b": (2048, 16, 32, 8, 8192),
}
LLAMA_CONTEXT = 131072  # Llama-3.1's context
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def build_random_llama(path: Path, *, shape: str, tokenizer_from: Path, dtype: str = "bfloat16", device: str = "auto",
                       seed: int = 0) -> Path:
    import torch
    from safetensors.torch import save_file

    hidden, layers, heads, kv_heads, inter = SHAPES[shape]
    config = {
        **tiny_model.model_config(),
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": inter, "head_dim": hidden // heads,
        "torch_dtype": dtype,
        "max_position_embeddings": LLAMA_CONTEXT,  # long-context workload points need it; 4096 would refuse them
    }
    vocab, head_dim = config["vocab_size"], hidden // heads
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch_dtype = getattr(torch, dtype)
    gen = torch.Generator(device=device).manual_seed(seed)

    def tensor(*shape_, std=0.02):
        return (torch.randn(*shape_, generator=gen, device=device, dtype=torch.float32) * std).to(torch_dtype).cpu()

    weights = {"model.embed_tokens.weight": tensor(vocab, hidden, std=1.0), "lm_head.weight": tensor(vocab, hidden),
               "model.norm.weight": torch.ones(hidden, dtype=torch_dtype)}
    for i in range(layers):
        p = f"model.layers.{i}."
        weights.update({
            p + "self_attn.q_proj.weight": tensor(heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": tensor(kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": tensor(kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": tensor(hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": tensor(inter, hidden),
            p + "mlp.up_proj.weight": tensor(inter, hidden),
            p + "mlp.down_proj.weight": tensor(hidden, inter),
            p + "input_layernorm.weight": torch.ones(hidden, dtype=torch_dtype),
            p + "post_attention_layernorm.weight": torch.ones(hidden, dtype=torch_dtype),
        })
    path.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(config, indent=1))
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, path / name)
    return path


def copy_tokenizer(tokenizer_from: Path, path: Path) -> None:
    if not (tokenizer_from / "tokenizer.json").is_file():
        raise moe_mla.ConfigError(f"{tokenizer_from} holds no tokenizer.json: build the tiny model first "
                                  f"(python -m runners tiny-model {tokenizer_from}) or pass --tokenizer-from")
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, path / name)


def build_moe_mla(path: Path, config: dict, *, tokenizer_from: Path, weights: bool = False,
                  dtype: str = "bfloat16", seed: int = 0) -> dict:
    """Write CONFIG (validated, layers applied) as a model folder at PATH; return its summary."""
    if config["vocab_size"] < tiny_model.VOCAB_SIZE:
        raise moe_mla.ConfigError(f"vocab_size {config['vocab_size']} is below the tokenizer's "
                                  f"{tiny_model.VOCAB_SIZE} tokens")
    ids = tiny_model.generation_config()  # the tiny tokenizer's special tokens, not the original's
    config = {**config, **ids, "torch_dtype": dtype}
    path.mkdir(parents=True, exist_ok=True)
    copy_tokenizer(tokenizer_from, path)
    (path / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (path / "generation_config.json").write_text(json.dumps(ids, indent=1) + "\n")
    if weights:
        from .moe_weights import write_weights
        write_weights(config, path, dtype=dtype, seed=seed)
    return moe_mla.summary(config)


def add_arguments(parser):
    parser.add_argument("path", type=Path)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--shape", choices=sorted(SHAPES), help="a Llama shape (default llama-8b; writes weights)")
    what.add_argument("--config", help="an MoE + MLA config: a JSON file or a shipped name "
                                       "(moe-mla-h200, moe-mla-tiny)")
    parser.add_argument("--layers", type=int, help="with --config: this many decoder layers")
    parser.add_argument("--weights", action="store_true",
                        help="with --config: write random safetensors weights (else serve with --load-format dummy)")
    parser.add_argument("--tokenizer-from", type=Path, default=Path("var/tiny-model"),
                        help="a tiny model directory (default var/tiny-model)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])


def _main_moe(args) -> int:
    try:
        config = moe_mla.with_layers(moe_mla.load_config(args.config), args.layers)
        info = build_moe_mla(args.path, config, tokenizer_from=args.tokenizer_from, weights=args.weights,
                             dtype=args.dtype)
    except moe_mla.ConfigError as e:
        print(f"random-model: {e}", file=sys.stderr)
        return 2
    print(f"wrote {info['architecture']} ({info['layers']} layers: {info['dense_layers']} dense, "
          f"{info['moe_layers']} MoE) to {args.path}: {info['parameters']:,} parameters "
          f"({info['active_parameters']:,} active per token), {info['bf16_bytes'] / 1e9:.1f} GB in bf16"
          + ("" if args.weights else "; serve with --load-format dummy"))
    return 0


def main(args) -> int:
    if args.config:
        return _main_moe(args)
    if args.layers is not None or args.weights:
        print("random-model: --layers and --weights go with --config", file=sys.stderr)
        return 2
    shape = args.shape or "llama-8b"
    build_random_llama(args.path, shape=shape, tokenizer_from=args.tokenizer_from, dtype=args.dtype)
    print(f"wrote {shape}-shaped random Llama to {args.path}")
    return 0
