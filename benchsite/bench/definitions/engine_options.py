"""The engine flags and environment a variant may ask for: an allow-list with types.

Variants come from the web (the admin, benchmarks-as-code files): nothing outside this list
reaches `vllm serve`. A flag is a switch (no value), a number in a range, one of a few words,
or a JSON object; JSON-valued flags (`--compilation-config`, ...) are parsed and must be
objects, since their keys differ between vLLM versions and are checked by vLLM itself.
Environment variables: NCCL_*, VLLM_* (but those that load code), a few named ones, each a
short one-line token. runners/engine/args.py checks the syntax on the GPU side as well.
"""
import json
import re

SWITCH, INT, FLOAT, WORD, JSON_OBJECT = "switch", "int", "float", "word", "json"

# flag -> (type, constraint): a (low, high) range for numbers, the words for WORD
FLAGS = {
    "--enforce-eager": (SWITCH, None),
    "--disable-custom-all-reduce": (SWITCH, None),
    "--enable-prefix-caching": (SWITCH, None),
    "--no-enable-prefix-caching": (SWITCH, None),
    "--enable-chunked-prefill": (SWITCH, None),
    "--no-enable-chunked-prefill": (SWITCH, None),
    "--dtype": (WORD, {"auto", "half", "float16", "bfloat16", "float", "float32"}),
    "--kv-cache-dtype": (WORD, {"auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"}),
    "--quantization": (WORD, {"fp8", "awq", "gptq", "marlin", "bitsandbytes", "compressed-tensors", "modelopt"}),
    "--load-format": (WORD, {"auto", "dummy", "safetensors", "pt"}),
    "--safetensors-load-strategy": (WORD, {"lazy", "eager", "torchao"}),
    "--distributed-executor-backend": (WORD, {"mp", "ray", "uni"}),
    "--max-model-len": (INT, (16, 1 << 21)),
    "--max-num-seqs": (INT, (1, 65536)),
    "--max-num-batched-tokens": (INT, (16, 1 << 22)),
    "--block-size": (INT, (1, 1024)),
    "--seed": (INT, (0, 2 ** 31 - 1)),
    "--pipeline-parallel-size": (INT, (1, 64)),
    "--max-seq-len-to-capture": (INT, (1, 1 << 21)),
    "--gpu-memory-utilization": (FLOAT, (0.01, 1.0)),
    "--swap-space": (FLOAT, (0.0, 1024.0)),
    "--cpu-offload-gb": (FLOAT, (0.0, 4096.0)),
    "--compilation-config": (JSON_OBJECT, None),
    "--speculative-config": (JSON_OBJECT, None),
    "--override-generation-config": (JSON_OBJECT, None),
    "--hf-overrides": (JSON_OBJECT, None),
}
MAX_JSON_CHARS = 10_000

ENV_PREFIXES = ("NCCL_", "VLLM_")
ENV_NAMES = {"OMP_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
             "TORCH_CUDA_ARCH_LIST", "CUDA_DEVICE_MAX_CONNECTIONS"}
ENV_DENIED = {"VLLM_PLUGINS", "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "VLLM_CONFIGURE_LOGGING",
              "VLLM_LOGGING_CONFIG_PATH", "VLLM_RPC_BASE_PATH", "VLLM_CACHE_ROOT"}  # load code or move files
ENV_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,99}$")
ENV_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:=/+^-]{0,200}$")


class OptionError(ValueError):
    """A flag or variable outside the allow-list, or a value of the wrong type."""


def _value_ok(kind: str, constraint, raw: str, flag: str):
    try:
        if kind == INT:
            value = int(raw)
        elif kind == FLOAT:
            value = float(raw)
        elif kind == WORD:
            if raw not in constraint:
                raise OptionError(f"{flag}={raw!r}: choose one of {sorted(constraint)}")
            return
        else:
            if len(raw) > MAX_JSON_CHARS or not isinstance(json.loads(raw), dict):
                raise OptionError(f"{flag} takes a JSON object (at most {MAX_JSON_CHARS} characters)")
            return
    except ValueError as exc:
        if isinstance(exc, OptionError):
            raise
        raise OptionError(f"{flag}={raw[:100]!r} is not {'an integer' if kind == INT else 'a number' if kind == FLOAT else 'valid JSON'}: {exc}") from None
    low, high = constraint
    if not low <= value <= high:
        raise OptionError(f"{flag}={raw} is out of range [{low}, {high}]")


def check_flags(flags) -> None:
    """Raise OptionError unless FLAGS is a list of allowed flags with values of their type."""
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise OptionError("flags must be a list of strings")
    i = 0
    while i < len(flags):
        name, eq, inline = flags[i].partition("=")
        if name not in FLAGS:
            raise OptionError(f"engine flag {name!r} is not allowed; allowed: {', '.join(sorted(FLAGS))}")
        kind, constraint = FLAGS[name]
        if kind == SWITCH:
            if eq:
                raise OptionError(f"{name} is a switch: it takes no value")
            i += 1
            continue
        if eq:
            raw, i = inline, i + 1
        elif i + 1 < len(flags):
            raw, i = flags[i + 1], i + 2
        else:
            raise OptionError(f"{name} needs a value")
        _value_ok(kind, constraint, raw, name)


def check_env(env) -> None:
    """Raise OptionError unless ENV maps allowed names to short one-line tokens."""
    if not isinstance(env, dict):
        raise OptionError("env must be an object of NAME: value strings")
    for name, value in env.items():
        allowed = isinstance(name, str) and ENV_NAME_RE.match(name) and (
            name in ENV_NAMES or name.startswith(ENV_PREFIXES)) and name not in ENV_DENIED
        if not allowed:
            raise OptionError(f"environment variable {name!r} is not allowed; allowed: {', '.join(ENV_PREFIXES)}* "
                              f"(but {', '.join(sorted(ENV_DENIED))}) and {', '.join(sorted(ENV_NAMES))}")
        if not isinstance(value, str) or not ENV_VALUE_RE.match(value):
            raise OptionError(f"{name}={value!r}: a value is up to 200 characters of A-Z a-z 0-9 _ . , : = / + ^ -")
