"""A random-weight Llama of realistic shape, generated on the GPU host itself (no hub).

Decode speed depends on shapes, not on weight values, so a Llama-3-8B-shaped model with
random weights measures what a real one would, and 7 B parameters are written in seconds
instead of downloaded. The tokenizer is copied from the tiny model (`runners tiny-model`).

    python -m runners random-model /models/llama-8b-shape --tokenizer-from var/tiny-model
"""
import json
import shutil
from pathlib import Path

from . import tiny_model

SHAPES = {
    # hidden, layers, heads, kv heads, intermediate
    "llama-8b": (4096, 32, 32, 8, 14336),
    "llama-1b": (2048, 16, 32, 8, 8192),
}
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


def add_arguments(parser):
    parser.add_argument("path", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-8b")
    parser.add_argument("--tokenizer-from", type=Path, required=True, help="a tiny model directory")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])


def main(args) -> int:
    build_random_llama(args.path, shape=args.shape, tokenizer_from=args.tokenizer_from, dtype=args.dtype)
    print(f"wrote {args.shape}-shaped random Llama to {args.path}")
    return 0
