"""vLLM's command-line flags as `vllm serve` reads them (`--a-b V`, `--a-b=V`, `--a_b V`): the
one parser for every reader of a job's engine arguments."""
from __future__ import annotations


def flag_name(arg: str) -> str:
    """`--max_model_len=5` -> `--max-model-len`: the name vLLM reads."""
    return "--" + arg.split("=", 1)[0][2:].replace("_", "-")


def has_flag(args, name: str) -> bool:
    """Does ARGS hold flag NAME (any of its spellings)?"""
    return any(a.startswith("--") and flag_name(a) == name for a in args)


def flag_value(args, name: str) -> str | None:
    """The value of flag NAME in ARGS (`--a-b V` or `--a-b=V`); the last one wins; None when absent."""
    args, value = list(args), None
    for i, arg in enumerate(args):
        if not arg.startswith("--") or flag_name(arg) != name:
            continue
        _, eq, inline = arg.partition("=")
        value = inline if eq else (args[i + 1] if i + 1 < len(args) else None)
    return value
