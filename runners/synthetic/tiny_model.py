"""The tiny Llama used on CPU machines and in tests: `python -m runners tiny-model PATH`.

A LlamaForCausalLM with random weights (hidden 256, 4 layers, 8 heads / 4 KV heads, so
tensor-parallel 2 divides both) and a byte-level BPE tokenizer trained on the Python
standard library's sources. Nothing is downloaded.

Deterministic: every tensor comes from its own generator seeded from (SEED, tensor name),
the tokenizer's corpus is a sorted list of files, so a rebuild is byte-identical (same
Python stdlib, torch, tokenizers and transformers versions).

Weights are float32 (about 46 MB): with `--dtype float32`, vLLM's greedy output equals
Hugging Face transformers', which the correctness tests use as an independent reference.
Note vLLM's `--dtype auto` serves a float32 checkpoint in bf16/fp16; pass `--dtype float32`
where exact agreement matters.

`build_tiny_model(path)` returns at once when PATH already holds a complete model whose
stamp (a hash of the recipe, the library versions and the corpus file list) matches and
whose files match the checksums recorded in the stamp. Otherwise it builds into a temporary
sibling folder and renames it into place, under a lock file, so an interrupted or
concurrent build never leaves a half-written model at PATH.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

GENERATOR_VERSION = 2
SEED = 20240601
STAMP_FILE = "bench-tiny-model.json"

# Token ids: <unk>=0, <s>=1, </s>=2, <pad>=3 (the Llama convention, plus padding).
SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
UNK_ID, BOS_ID, EOS_ID, PAD_ID = 0, 1, 2, 3

VOCAB_SIZE = 16384  # `vllm bench` feeds random ids below 10,000: keep >= 10,000
HIDDEN_SIZE = 256
NUM_LAYERS = 4
NUM_HEADS = 8
NUM_KV_HEADS = 4
INTERMEDIATE_SIZE = 688
MAX_POSITIONS = 4096
INITIALIZER_RANGE = 0.02  # written to config.json only; see init_std for the weights
EMBED_STD = 1.0
LM_HEAD_STD = 0.25
DTYPE = "float32"
# Corpus for the tokenizer: the first files (sorted by relative path) of the stdlib, up to
# this many bytes. Test suites are left out: distributions often strip them.
MAX_CORPUS_BYTES = 6_000_000
_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}

CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n"
    "{% endfor %}{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)

FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def model_config() -> dict:
    head_dim = HIDDEN_SIZE // NUM_HEADS
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": PAD_ID,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": HIDDEN_SIZE,
        "initializer_range": INITIALIZER_RANGE,
        "intermediate_size": INTERMEDIATE_SIZE,
        "max_position_embeddings": MAX_POSITIONS,
        "mlp_bias": False,
        "num_attention_heads": NUM_HEADS,
        "num_hidden_layers": NUM_LAYERS,
        "num_key_value_heads": NUM_KV_HEADS,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": DTYPE,
        "use_cache": True,
        "vocab_size": VOCAB_SIZE,
    }


def generation_config() -> dict:
    return {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID}


def _versions() -> dict:
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for dist in ("torch", "tokenizers", "transformers", "safetensors"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def corpus_files() -> list[Path]:
    """The tokenizer's training files: stdlib *.py, sorted, capped at MAX_CORPUS_BYTES."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in filenames:
            if name.endswith(".py"):
                p = Path(dirpath) / name
                found.append((p.relative_to(root).as_posix(), p))
    found.sort()
    chosen, total = [], 0
    for _rel, p in found:
        try:
            size = p.stat().st_size
        except OSError:
            continue
        if total + size > MAX_CORPUS_BYTES:
            continue
        chosen.append(p)
        total += size
    return chosen


def recipe() -> dict:
    """Everything the output depends on; its hash is the content stamp."""
    root = Path(sysconfig.get_paths()["stdlib"])
    listing = hashlib.sha256()
    for p in corpus_files():
        listing.update(f"{p.relative_to(root).as_posix()}\0{p.stat().st_size}\n".encode())
    return {
        "generator_version": GENERATOR_VERSION,
        "seed": SEED,
        "init": {"embed_std": EMBED_STD, "lm_head_std": LM_HEAD_STD, "projections": "fan_in**-0.5"},
        "config": model_config(),
        "generation_config": generation_config(),
        "special_tokens": SPECIAL_TOKENS,
        "chat_template": CHAT_TEMPLATE,
        "max_corpus_bytes": MAX_CORPUS_BYTES,
        "corpus_listing_sha256": listing.hexdigest(),
        "versions": _versions(),
    }


def _stamp_of(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_complete(path: Path, stamp: str | None = None) -> bool:
    """True when PATH holds a model built from the current recipe, every file intact."""
    path = Path(path)
    try:
        recorded = json.loads((path / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return False
    if stamp is None:
        stamp = _stamp_of(recipe())
    if not isinstance(recorded, dict) or recorded.get("stamp") != stamp:
        return False
    files = recorded.get("files")
    if not isinstance(files, dict) or set(files) != set(FILES):
        return False
    try:
        return all(_sha256_file(path / name) == digest for name, digest in files.items())
    except OSError:
        return False


# ---------------------------------------------------------------------------- weights

def tensor_shapes() -> dict[str, tuple[int, ...]]:
    head_dim = HIDDEN_SIZE // NUM_HEADS
    q, kv = NUM_HEADS * head_dim, NUM_KV_HEADS * head_dim
    shapes = {"model.embed_tokens.weight": (VOCAB_SIZE, HIDDEN_SIZE)}
    for i in range(NUM_LAYERS):
        p = f"model.layers.{i}."
        shapes[p + "self_attn.q_proj.weight"] = (q, HIDDEN_SIZE)
        shapes[p + "self_attn.k_proj.weight"] = (kv, HIDDEN_SIZE)
        shapes[p + "self_attn.v_proj.weight"] = (kv, HIDDEN_SIZE)
        shapes[p + "self_attn.o_proj.weight"] = (HIDDEN_SIZE, q)
        shapes[p + "mlp.gate_proj.weight"] = (INTERMEDIATE_SIZE, HIDDEN_SIZE)
        shapes[p + "mlp.up_proj.weight"] = (INTERMEDIATE_SIZE, HIDDEN_SIZE)
        shapes[p + "mlp.down_proj.weight"] = (HIDDEN_SIZE, INTERMEDIATE_SIZE)
        shapes[p + "input_layernorm.weight"] = (HIDDEN_SIZE,)
        shapes[p + "post_attention_layernorm.weight"] = (HIDDEN_SIZE,)
    shapes["model.norm.weight"] = (HIDDEN_SIZE,)
    shapes["lm_head.weight"] = (VOCAB_SIZE, HIDDEN_SIZE)
    return shapes


def init_std(name: str, shape: tuple[int, ...]) -> float:
    """Unit-scale activations: embeddings N(0, 1), projections N(0, 1/fan_in), logits std ~4.

    With transformers' default (every weight N(0, 0.02)) the residual stream is the input
    embedding and greedy output falls into loops of 3-20 distinct tokens in 96, which a
    degenerate-output check cannot tell from corruption. With this scale it is varied
    (about 125 distinct tokens in 128) and vLLM float32 still equals transformers.
    """
    if name == "model.embed_tokens.weight":
        return EMBED_STD
    if name == "lm_head.weight":
        return LM_HEAD_STD
    return shape[1] ** -0.5


def _write_weights(out: Path) -> None:
    import torch
    from safetensors.torch import save_file

    dtype = getattr(torch, DTYPE)
    tensors = {}
    for name, shape in tensor_shapes().items():
        if len(shape) == 1:  # RMSNorm scales start at one, as in transformers
            tensors[name] = torch.ones(shape, dtype=dtype)
            continue
        seed = int.from_bytes(hashlib.sha256(f"{SEED}:{name}".encode()).digest()[:8], "little")
        gen = torch.Generator().manual_seed(seed & ((1 << 63) - 1))
        t = torch.randn(shape, generator=gen, dtype=torch.float32) * init_std(name, shape)
        tensors[name] = t.to(dtype).contiguous()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


# -------------------------------------------------------------------------- tokenizer

def _corpus_iter(files: list[Path]):
    for p in files:
        with open(p, encoding="utf-8", errors="ignore") as f:
            yield f.read()


def _write_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus_iter(corpus_files()), trainer=trainer)
    if tok.get_vocab_size() < 10_000:
        raise RuntimeError(f"tokenizer vocabulary is only {tok.get_vocab_size()} (< 10,000)")
    for token, want in zip(SPECIAL_TOKENS, (UNK_ID, BOS_ID, EOS_ID, PAD_ID)):
        if tok.token_to_id(token) != want:
            raise RuntimeError(f"special token {token} got id {tok.token_to_id(token)}, not {want}")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", BOS_ID)]
        ),
    ])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    # save_pretrained may add files that depend on the transformers version (e.g. a chat
    # template file); keep exactly FILES, with the chat template inside tokenizer_config.
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    # transformers 5 writes "TokenizersBackend", which transformers 4 (GPU hosts with an
    # older vLLM) does not know; both load "PreTrainedTokenizerFast".
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    if not (out / "special_tokens_map.json").exists():
        (out / "special_tokens_map.json").write_text(json.dumps({
            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        }, indent=2, sort_keys=True) + "\n")
    for extra in set(os.listdir(out)) - set(FILES):
        if extra in ("chat_template.jinja", "added_tokens.json"):
            (out / extra).unlink()


# ------------------------------------------------------------------------------ build

@contextlib.contextmanager
def _locked(path: Path):
    lock_path = path.parent / f".{path.name}.lock"
    with open(lock_path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def build_tiny_model(path: Path, *, force: bool = False) -> Path:
    """Build the tiny model at PATH (or reuse a complete one there); return PATH.

    Raises FileExistsError when PATH is a non-empty folder that is not one of our models,
    rather than deleting somebody's files.
    """
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = recipe()
    stamp = _stamp_of(rec)
    with _locked(path):
        if not force and is_complete(path, stamp):
            return path
        if path.exists():
            if not path.is_dir():
                raise FileExistsError(f"{path} exists and is not a folder")
            if any(path.iterdir()) and not (path / STAMP_FILE).exists():
                raise FileExistsError(f"{path} is not empty and holds no tiny model; refusing to replace it")
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.build-", dir=path.parent))
        try:
            _write_json(tmp / "config.json", model_config())
            _write_json(tmp / "generation_config.json", generation_config())
            _write_weights(tmp)
            _write_tokenizer(tmp)
            missing = [f for f in FILES if not (tmp / f).is_file()]
            if missing:
                raise RuntimeError(f"tiny model build did not write {missing}")
            _write_json(tmp / STAMP_FILE, {
                "stamp": stamp,
                "recipe": rec,
                "files": {name: _sha256_file(tmp / name) for name in FILES},
            })
            os.chmod(tmp, 0o755)
            for name in os.listdir(tmp):
                os.chmod(tmp / name, 0o644)
            if path.exists():
                shutil.rmtree(path)
            os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="folder to write the model to")
    parser.add_argument("--force", action="store_true", help="rebuild even when PATH is up to date")


def main(args) -> int:
    t0 = time.monotonic()
    path = Path(args.path).absolute()
    reused = not args.force and is_complete(path)
    build_tiny_model(path, force=args.force)
    what = "up to date" if reused else "built"
    print(f"tiny model {what} at {path} ({time.monotonic() - t0:.1f} s)")
    return 0
