"""The tiny model as a quantized GGUF file: `python -m runners random-gguf OUT.gguf`.

    python -m runners random-gguf var/tiny.gguf [--arch llama] [--type Q8_0] [--from var/tiny-model]
    python -m runners random-gguf var/tiny-swapped.gguf --swap-shards blk.0.ffn_up.weight

The weights are the tiny model's (random, see tiny_model.py), so a correct GGUF loader must
decode like the safetensors model up to quantization error; the tokenizer is its BPE
(`tokenizer.ggml.model` gpt2). Tensors follow llama.cpp's converter: its names (blk.N.attn_q
...), F32 one-dimensional tensors, the Q/K row permutation of the llama architecture, and F16
for a matrix whose rows are no whole number of quantization blocks (the FFN's 688 columns).

`--swap-shards NAME` writes NAME's rows as SHARDS equal row blocks in reversed order: what a
loader does that concatenates tensor-parallel shards (or fused gate/up halves) in the wrong
order, the seeds' class of GGUF bug. Everything else in the file stays byte for byte the same,
so a correctness probe that flags the swapped file flags exactly that tensor.

The `gguf` package (PyPI, llama.cpp's gguf-py) quantizes Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1; the
K-quants (Q4_K ...) it only dequantizes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import tiny_model

TYPES = ("Q8_0", "Q4_0", "Q5_0", "F16", "F32")
ARCHS = ("llama",)
HF_TO_GGUF = {  # Hugging Face Llama names -> llama.cpp's
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
HF_LAYER_TO_GGUF = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


class GGUFError(ValueError):
    """A request random-gguf refuses, with the reason."""


def gguf_name(hf_name: str) -> str:
    if hf_name in HF_TO_GGUF:
        return HF_TO_GGUF[hf_name]
    _, _, layer, rest = hf_name.split(".", 3)  # model.layers.N.<module>.weight
    return f"blk.{layer}.{HF_LAYER_TO_GGUF[rest.removesuffix('.weight')]}.weight"


def permute_rotary(w, n_head: int):
    """llama.cpp's Q/K permutation (convert_hf_to_gguf.py): HF's rotate-half layout to GGUF's
    interleaved one. GGUF loaders undo it, so a file without it decodes wrongly."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def swap_row_shards(w, shards: int):
    """W's rows cut into SHARDS equal blocks, written last block first."""
    rows = w.shape[0]
    if shards < 2 or rows % shards:
        raise GGUFError(f"cannot cut {rows} rows into {shards} equal shards")
    blocks = w.reshape(shards, rows // shards, *w.shape[1:])
    return blocks[::-1].reshape(w.shape).copy()


def quantize(w, qtype_name: str):
    """(data, GGML type) as llama.cpp stores W: 1-D in F32, rows of a partial block in F16."""
    import gguf
    import numpy as np

    qtype = gguf.GGMLQuantizationType[qtype_name]
    if w.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
        return w.astype(np.float32), gguf.GGMLQuantizationType.F32
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == gguf.GGMLQuantizationType.F16 or w.shape[-1] % block:
        return w.astype(np.float16), gguf.GGMLQuantizationType.F16
    return gguf.quants.quantize(w.astype(np.float32), qtype), qtype


def tokenizer_metadata(writer, tokenizer_json: Path) -> None:
    import gguf

    tok = json.loads(tokenizer_json.read_text())
    vocab = tok["model"]["vocab"]
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    if None in tokens:
        raise GGUFError(f"{tokenizer_json}: token ids are not 0..{len(vocab) - 1}")
    special = {t["id"] for t in tok.get("added_tokens", []) if t.get("special")}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                            for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tiny_model.BOS_ID)
    writer.add_eos_token_id(tiny_model.EOS_ID)
    writer.add_unk_token_id(tiny_model.UNK_ID)
    writer.add_pad_token_id(tiny_model.PAD_ID)


def _model_metadata(writer, config: dict, qtype_name: str) -> None:
    import gguf

    writer.add_name("bench tiny llama")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_dimension_count(config["head_dim"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType[f"MOSTLY_{qtype_name}" if qtype_name != "F32" else "ALL_F32"])


def gguf_tensors(model_dir: Path, config: dict, qtype_name: str, swap: str | None = None, shards: int = 2):
    """[(GGUF name, data, GGML type)] of the model at MODEL_DIR, in the checkpoint's order."""
    from safetensors.numpy import load_file

    hf = load_file(str(model_dir / "model.safetensors"))
    out, found = [], False
    for hf_name in tiny_model.tensor_shapes():
        name, w = gguf_name(hf_name), hf[hf_name]
        if name.endswith("attn_q.weight"):
            w = permute_rotary(w, config["num_attention_heads"])
        elif name.endswith("attn_k.weight"):
            w = permute_rotary(w, config["num_key_value_heads"])
        if name == swap:  # before quantizing: Q8_0 blocks lie within a row, so rows move whole
            w, found = swap_row_shards(w, shards), True
        out.append((name, *quantize(w, qtype_name)))
    if swap is not None and not found:
        raise GGUFError(f"no tensor {swap!r} (e.g. blk.0.ffn_up.weight, blk.0.attn_q.weight, output.weight)")
    return out


def write_gguf(out: Path, model_dir: Path, *, arch: str = "llama", qtype_name: str = "Q8_0",
               swap: str | None = None, shards: int = 2) -> Path:
    import gguf

    if arch not in ARCHS:
        raise GGUFError(f"--arch {arch}: only {', '.join(ARCHS)} (the tiny model's architecture)")
    if qtype_name not in TYPES:
        raise GGUFError(f"--type {qtype_name}: the gguf package quantizes only {', '.join(TYPES)}")
    if not (model_dir / "model.safetensors").is_file():
        raise GGUFError(f"{model_dir} holds no tiny model: python -m runners tiny-model {model_dir}")
    config = json.loads((model_dir / "config.json").read_text())
    tensors = gguf_tensors(model_dir, config, qtype_name, swap, shards)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out), arch)
    _model_metadata(writer, config, qtype_name)
    tokenizer_metadata(writer, model_dir / "tokenizer.json")
    for name, data, qtype in tensors:
        writer.add_tensor(name, data, raw_dtype=qtype)  # bytes of a quantized type: shape from the type
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def add_arguments(parser) -> None:
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--arch", default="llama", help="GGUF architecture (llama: the tiny model's)")
    parser.add_argument("--type", default="Q8_0", help=f"quantization: {', '.join(TYPES)} (default Q8_0)")
    parser.add_argument("--from", dest="model_dir", type=Path, default=Path("var/tiny-model"),
                        help="the tiny model whose weights and tokenizer to write (default var/tiny-model)")
    parser.add_argument("--swap-shards", metavar="TENSOR", help="write TENSOR's row shards in reversed order")
    parser.add_argument("--shards", type=int, default=2, help="with --swap-shards: how many (default 2)")


def main(args) -> int:
    try:
        write_gguf(args.out, args.model_dir, arch=args.arch, qtype_name=args.type, swap=args.swap_shards,
                   shards=args.shards)
    except GGUFError as e:
        print(f"random-gguf: {e}", file=sys.stderr)
        return 2
    swapped = f", {args.swap_shards} in {args.shards} swapped shards" if args.swap_shards else ""
    print(f"wrote {args.out} ({args.type}{swapped}, {args.out.stat().st_size / 1e6:.1f} MB)")
    return 0
