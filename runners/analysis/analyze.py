"""Decompose a decode step into allreduce time and everything else ("compute").

    python -m runners analyze --step-ms 17.28 --allreduce-calls 156 --allreduce-us 50:70
    python -m runners analyze --tok-s 57.9  --allreduce-calls 65  --allreduce-us 18

This is the seed's back-of-the-envelope analysis (156 allreduces x 50-70 us against a
17.28 ms step -> 45-63% of the step, ceiling ~105-157 tok/s if allreduce were free) as a
command and as a function, `decompose()`, that the web side imports (plain Python, no
Django, no torch).

Model: a decode step of one request makes one token, and its allreduces do not overlap
with compute (sequential kernels on one stream, as in vLLM's decode). Then

    allreduce_ms_per_token = calls x us_per_call / 1000
    allreduce_share        = allreduce_ms_per_token / step_ms
    compute_ms_per_token   = step_ms - allreduce_ms_per_token
    ceiling_tok_s          = 1000 / compute_ms_per_token   (tok/s if allreduce were free)

Ranges. Any of --step-ms, --tok-s, --allreduce-calls, --allreduce-us may be a range
`low:high`. Each output is then {"low": x, "high": y} with low <= high, the interval that
holds every combination of the inputs (interval arithmetic):

    allreduce_ms  low = calls.low  x us.low            high = calls.high x us.high
    share         low = allreduce.low / step.high      high = allreduce.high / step.low
    compute_ms    low = step.low - allreduce.high      high = step.high - allreduce.low
    ceiling_tok_s low = 1000 / compute.high            high = 1000 / compute.low

so the high ceiling comes from the high allreduce figure (least compute left), and the
low allreduce figure from the low per-call latency. --tok-s T is the step 1000/T ms, so
a tok/s range T1:T2 gives the step range 1000/T2 : 1000/T1.

Errors (ValueError from decompose(), exit status 2 from the command): a non-positive or
non-finite value, a malformed range (`a:b:c`, `70:50`), and allreduce time that reaches
the step time at any corner of the ranges (a share of 1 or more is impossible: the step
would leave no time for compute).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass

__all__ = ["Range", "parse_value", "decompose", "add_arguments", "main"]


@dataclass(frozen=True)
class Range:
    low: float
    high: float

    def __post_init__(self):
        for v in (self.low, self.high):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"not a finite number: {v!r}")
        if self.low > self.high:
            raise ValueError(f"range low {self.low:g} is above high {self.high:g}")

    def as_json(self):
        return {"low": self.low, "high": self.high}


def parse_value(text: str, name: str = "value") -> float | Range:
    """'17.28' -> 17.28; '50:70' -> Range(50, 70). Raises ValueError with the name in it."""
    parts = str(text).strip().split(":")
    if len(parts) > 2 or any(p.strip() == "" for p in parts):
        raise ValueError(f"{name}: malformed value {text!r}; give a number or a range low:high")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{name}: malformed value {text!r}; give a number or a range low:high") from None
    for n in numbers:
        if not math.isfinite(n) or n <= 0:
            raise ValueError(f"{name}: {text!r} must be positive and finite")
    if len(numbers) == 1:
        return numbers[0]
    if numbers[0] > numbers[1]:
        raise ValueError(f"{name}: range {text!r} has low above high; write it low:high")
    return Range(numbers[0], numbers[1])


def _as_range(v, name: str) -> Range:
    if isinstance(v, Range):
        r = v
    elif isinstance(v, (tuple, list)) and len(v) == 2:
        try:
            r = Range(float(v[0]), float(v[1]))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}: {e}") from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        if not math.isfinite(v):
            raise ValueError(f"{name}: must be finite, got {v!r}")
        r = Range(float(v), float(v))
    else:
        raise ValueError(f"{name}: expected a number or a (low, high) pair, got {v!r}")
    if r.low <= 0:
        raise ValueError(f"{name}: must be positive, got {r.low:g}")
    return r


def _is_range(v) -> bool:
    return isinstance(v, (Range, tuple, list))


def decompose(step_ms, calls, us_per_call, *, tok_s=None) -> dict:
    """Split a decode step into allreduce and compute.

    step_ms, calls, us_per_call: a number, or a Range / (low, high) pair. Give tok_s
    (number or range) instead of step_ms to start from a decode rate; pass step_ms=None.
    Returns {"allreduce_ms_per_token", "allreduce_share", "compute_ms_per_token",
    "ceiling_tok_s"} (plus "step_ms" and "tok_s"), each a float when no input is a range, else
    {"low", "high"}. Raises ValueError on impossible or malformed inputs.
    """
    if (step_ms is None) == (tok_s is None):
        raise ValueError("give exactly one of step_ms and tok_s")
    if tok_s is not None:
        t = _as_range(tok_s, "tok_s")
        step = Range(1000.0 / t.high, 1000.0 / t.low)
        ranged = _is_range(tok_s)
    else:
        step = _as_range(step_ms, "step_ms")
        ranged = _is_range(step_ms)
    n = _as_range(calls, "allreduce_calls")
    us = _as_range(us_per_call, "allreduce_us")
    ranged = ranged or _is_range(calls) or _is_range(us_per_call)

    ar = Range(n.low * us.low / 1000.0, n.high * us.high / 1000.0)
    if ar.high >= step.low:
        if ranged and ar.low < step.high:
            detail = (f"at the ranges' worst corner the allreduce time ({ar.high:g} ms) reaches the "
                      f"step time ({step.low:g} ms); narrow the ranges")
        else:
            detail = (f"allreduce time {ar.high:g} ms is not below the step time {step.low:g} ms")
        raise ValueError(f"impossible decomposition: {detail} (a share of 1 or more leaves no time "
                         f"for compute; check the calls per step and the per-call latency)")
    share = Range(ar.low / step.high, ar.high / step.low)
    compute = Range(step.low - ar.high, step.high - ar.low)
    ceiling = Range(1000.0 / compute.high, 1000.0 / compute.low)

    out = {
        "step_ms": step,
        "tok_s": Range(1000.0 / step.high, 1000.0 / step.low),
        "allreduce_ms_per_token": ar,
        "allreduce_share": share,
        "compute_ms_per_token": compute,
        "ceiling_tok_s": ceiling,
    }
    if ranged:
        return {k: v.as_json() for k, v in out.items()}
    return {k: v.low for k, v in out.items()}


def _rounded(v, digits=6):
    if isinstance(v, dict):
        return {k: _rounded(x, digits) for k, x in v.items()}
    if isinstance(v, float):
        return float(f"{v:.{digits}g}")
    return v


def add_arguments(parser):
    step = parser.add_mutually_exclusive_group(required=True)
    step.add_argument("--step-ms", help="decode step time in ms (inter-token latency), or low:high")
    step.add_argument("--tok-s", help="decode rate of one request in tok/s, or low:high")
    parser.add_argument("--allreduce-calls", required=True,
                        help="allreduce calls per decode step (e.g. 2 per layer + 1), or low:high")
    parser.add_argument("--allreduce-us", required=True,
                        help="microseconds per allreduce call (comm probe or profiler), or low:high")


def main(args) -> int:
    try:
        inputs = {}
        if args.step_ms is not None:
            inputs["step_ms"] = parse_value(args.step_ms, "--step-ms")
        else:
            inputs["tok_s"] = parse_value(args.tok_s, "--tok-s")
        inputs["allreduce_calls"] = parse_value(args.allreduce_calls, "--allreduce-calls")
        inputs["allreduce_us"] = parse_value(args.allreduce_us, "--allreduce-us")
        result = decompose(inputs.get("step_ms"), inputs["allreduce_calls"], inputs["allreduce_us"],
                           tok_s=inputs.get("tok_s"))
    except ValueError as e:
        print(f"analyze: error: {e}", file=sys.stderr)
        return 2
    doc = {"inputs": {k: (v.as_json() if isinstance(v, Range) else v) for k, v in inputs.items()}}
    doc.update(_rounded(result))
    if any(isinstance(v, Range) for v in inputs.values()):
        doc["range_convention"] = ("interval over all input combinations: allreduce low = calls.low x "
                                   "us.low; share high and ceiling high use the high allreduce and the "
                                   "low step (ceiling high = 1000 / (step.low - allreduce.high)); "
                                   "compute high = step.high - allreduce.low")
    print(json.dumps(doc, indent=2))
    return 0
