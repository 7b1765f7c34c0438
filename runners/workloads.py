"""What a job's workload points (runners.contract.WorkloadPoint) ask of the engine, and which
points it can hold.

The engine is sized from the points unless the benchmark's engine_args say otherwise:
`--max-model-len` is the largest prompt_tokens plus the largest max_tokens (only when a point
gives prompt_tokens: the prompt text of a `p0` point is short, the engine's default holds it),
`--max-num-seqs` the largest concurrency (only above 1). A single-point job gets neither, as before.

A point the engine cannot hold is skipped with a note, never shrunk (a smaller point would be
another series). It cannot hold a point whose prompt_tokens + max_tokens exceed --max-model-len,
nor one whose streams need more KV cache than the engine has: vLLM logs "Maximum concurrency for
N tokens per request: X.XXx" at start-up, so its KV capacity is N * X tokens, and a point needs
concurrency * (prompt_tokens + max_tokens) of them.
"""
from __future__ import annotations

import re

from runners.contract import JobSpec, SpecError, WorkloadPoint, workload_points
from runners.flags import flag_value

_KV_LINE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request:\s*([\d.]+)x")


def _int_flag(args: list[str], name: str) -> int | None:
    value = flag_value(args, name)
    return int(value) if value is not None and value.isdigit() else None


def engine_args(spec: JobSpec) -> list[str]:
    """The sizing flags the points need and the benchmark's engine_args do not set."""
    points, args = spec.workloads, list(spec.engine_args)
    out = []
    with_prompt = [p.prompt_tokens for p in points if p.prompt_tokens]
    if with_prompt and flag_value(args, "--max-model-len") is None:
        out += ["--max-model-len", str(max(with_prompt) + max(p.max_tokens for p in points))]
    concurrency = max(p.concurrency for p in points)
    if concurrency > 1 and flag_value(args, "--max-num-seqs") is None:
        out += ["--max-num-seqs", str(concurrency)]
    return out


def kv_capacity_tokens(log_text: str) -> int | None:
    """The KV cache the engine reported at start-up, in tokens (None: no such line in its log)."""
    found = _KV_LINE.findall(log_text or "")
    if not found:
        return None
    tokens, times = found[-1]
    return int(float(tokens.replace(",", "")) * float(times))


def skip_reason(point: WorkloadPoint, *, args: list[str], kv_tokens: int | None) -> str:
    """Why the engine cannot hold POINT ("" when it can): the context or the KV cache is short."""
    max_len = _int_flag(args, "--max-model-len")
    if max_len is not None and point.tokens_per_request > max_len:
        return (f"point {point.id} skipped: {point.tokens_per_request} tokens per request exceed "
                f"--max-model-len {max_len}")
    needed = point.concurrency * point.tokens_per_request
    if kv_tokens is not None and needed > kv_tokens:
        return (f"point {point.id} skipped: {point.concurrency} streams of {point.tokens_per_request} tokens need "
                f"{needed} tokens of KV cache, the engine has {kv_tokens}")
    return ""


def max_model_len(args: list[str]) -> int | None:
    """The context the benchmark's engine_args give (--max-model-len), if they set it."""
    return _int_flag(args, "--max-model-len")


def check_workloads(workloads, *, max_tokens: int, engine_args=()) -> list[WorkloadPoint]:
    """A benchmark's points as the web side checks them before any engine starts: valid, and each
    request within the model's context where the engine_args give it (--max-model-len). None
    listed: the single point, checked as it always was (by the engine). SpecError names the entry."""
    points = workload_points(workloads, max_tokens)
    context = max_model_len(list(engine_args or [])) if workloads else None
    for i, point in enumerate(points):
        if context is not None and point.tokens_per_request > context:
            raise SpecError(f"workload point {i + 1} ({point.id}): {point.tokens_per_request} tokens per request "
                            f"exceed the model's context, --max-model-len {context}")
    return points
