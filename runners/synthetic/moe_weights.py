"""Random safetensors weights for an MoE + MLA config (`random-model --config ... --weights`).

vLLM's `--load-format dummy` needs none of this. These weights are for readers of a real
checkpoint: Hugging Face transformers as a reference, a GGUF converter. The scale follows the
tiny model's (tiny_model.init_std): unit-scale activations, so greedy output is varied rather
than the loops that vLLM's dummy values (uniform +-1e-3) give. Sharded like Hugging Face
checkpoints (model-00001-of-0000N.safetensors + model.safetensors.index.json), one shard built
in memory at a time.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from . import moe_mla, tiny_model

MAX_SHARD_BYTES = 4 << 30


def _tensor(name: str, shape: tuple[int, ...], dtype, seed: int):
    import torch

    if len(shape) == 1:  # RMSNorm scales start at one; the router's bias at zero
        fill = 0.0 if name.endswith("e_score_correction_bias") else 1.0
        return torch.full(shape, fill, dtype=dtype)
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8]
    gen = torch.Generator().manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))
    std = tiny_model.init_std(name, shape)
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * std).to(dtype).contiguous()


def _shards(shapes: dict[str, tuple[int, ...]], itemsize: int, max_bytes: int) -> list[list[str]]:
    shards, current, size = [], [], 0
    for name, shape in shapes.items():
        nbytes = math.prod(shape) * itemsize
        if current and size + nbytes > max_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
    if current:
        shards.append(current)
    return shards


def write_weights(config: dict, out: Path, *, dtype: str = "bfloat16", seed: int = 0,
                  max_shard_bytes: int = MAX_SHARD_BYTES) -> list[Path]:
    import torch
    from safetensors.torch import save_file

    torch_dtype = getattr(torch, dtype)
    shapes = moe_mla.tensor_shapes(config)
    shards = _shards(shapes, torch.tensor([], dtype=torch_dtype).element_size(), max_shard_bytes)
    weight_map, written = {}, []
    for k, names in enumerate(shards, 1):
        file = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: _tensor(n, shapes[n], torch_dtype, seed) for n in names}, str(out / file),
                  metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(names, file))
        written.append(out / file)
    total = sum(math.prod(s) for s in shapes.values()) * torch.tensor([], dtype=torch_dtype).element_size()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=1) + "\n")
    return written
