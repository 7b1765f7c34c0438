"""The comm probe's vocabulary: NCCL protocols, dtypes and sizes, parsed from the command line
or a job's settings (plain Python, no torch)."""
from __future__ import annotations

import math

PROTOS = {"default": "default", "ll": "LL", "ll128": "LL128", "simple": "Simple"}
# Not an NCCL_PROTO: vLLM's own custom allreduce kernel (interleaved mode only; needs vLLM on the host).
CUSTOM = "custom"
DTYPES = {  # name -> (torch dtype attribute, bytes per element)
    "bf16": ("bfloat16", 2), "bfloat16": ("bfloat16", 2),
    "fp16": ("float16", 2), "float16": ("float16", 2), "half": ("float16", 2),
    "fp32": ("float32", 4), "float32": ("float32", 4), "float": ("float32", 4),
}
# A torch dtype's name (as torch and a model's config.json spell it) -> the short name results carry.
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


class CommError(ValueError):
    """A bad argument or an unusable host; the message says which."""


def parse_bytes(text: str) -> int:
    """'12288' -> 12288, '12K' -> 12288, '16M' -> 16777216 (K/M/G are powers of 1024)."""
    s = str(text).strip().upper()
    num = s.rstrip("KMGIB")
    unit = s[len(num):]
    if unit not in _UNITS or not num:
        raise CommError(f"bad size {text!r}: give bytes, optionally with K, M or G (powers of 1024)")
    try:
        value = float(num)
    except ValueError:
        raise CommError(f"bad size {text!r}: give bytes, optionally with K, M or G") from None
    n = value * _UNITS[unit]
    if not math.isfinite(n) or n <= 0 or n != int(n):
        raise CommError(f"bad size {text!r}: must be a positive whole number of bytes")
    return int(n)


def parse_protos(text: str) -> list[str]:
    out = []
    for part in str(text).split(","):
        key = part.strip().lower()
        if not key:
            continue
        name = CUSTOM if key == CUSTOM else PROTOS.get(key)
        if name is None:
            raise CommError(f"unknown NCCL protocol {part.strip()!r}: choose from default, LL, LL128, Simple "
                            "(or custom, vLLM's custom allreduce, in --mode interleaved)")
        if name not in out:
            out.append(name)
    if not out:
        raise CommError("no protocol given: choose from default, LL, LL128, Simple")
    return out


def dtype_info(name: str) -> tuple[str, int]:
    key = str(name).strip().lower()
    if key not in DTYPES:
        raise CommError(f"unknown dtype {name!r}: choose from bf16, fp16, fp32")
    return DTYPES[key]


def parse_gemv_mb(text: str) -> list[int]:
    """'144,144' -> bytes per block (MiB, powers of 1024), each positive."""
    out = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        try:
            mib = float(part)
        except ValueError:
            raise CommError(f"bad --gemv-mb entry {part.strip()!r}: give MiB per block, e.g. 144,144") from None
        if not math.isfinite(mib) or mib <= 0:
            raise CommError(f"bad --gemv-mb entry {part.strip()!r}: must be a positive number of MiB")
        out.append(int(mib * (1 << 20)))
    if not out:
        raise CommError("--gemv-mb is empty")
    return out
