"""The allreduce share at each workload point: one real TP=2 CPU engine (the tiny model), profiled
at concurrency 1, 2, 4, 8 with a short and a 256-token prompt, in one engine start.

    .venv/bin/python benchmarks/point_share.py [--model var/tiny-model] [--json out.json]
        [--concurrency 1,2,4,8] [--prompt-tokens 16,256] [--max-tokens 16]

Each row is one `measure_allreduce_share(..., concurrency=N, prompt_tokens=P)` session (the
allreduce probe at a workload point): N greedy streams released together under one profiler
session, each with its own cache_salt. Columns: share (lowest rank; the other rank's in
brackets), calls per step (the expected count for the model in the header), us per call
(lowest rank), the median step, the decode steps with all N streams of all decode steps, ok.
The figures are the CPU engine's (shared-memory or gloo allreduce, not NCCL): what carries over
to GPUs is how the share moves with the batch, not the numbers (docs/methods/allreduce-share.md).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes import allreduce as ar  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog. "


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def row(r: dict, concurrency: int, prompt_tokens: int) -> dict:
    ranks = r.get("ranks", [])
    return {"concurrency": concurrency, "prompt_tokens": prompt_tokens, "share_min": r.get("share_min"),
            "share_max": r.get("share_max"), "calls_per_step": r.get("calls_per_step"),
            "us_per_call_min": r.get("us_per_call_min"), "step_ms_median": r.get("step_ms_median"),
            "full_batch_steps": [x.get("full_batch_steps") for x in ranks],
            "decode_steps": [x.get("decode_steps") for x in ranks], "ok": r.get("ok"), "problems": r.get("problems")}


def print_row(x: dict) -> None:
    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    full = x["full_batch_steps"][0] if x["concurrency"] > 1 else x["decode_steps"][0]
    print(f"| {x['concurrency']} | {x['prompt_tokens']} | {pct(x['share_min'])} ({pct(x['share_max'])}) "
          f"| {x['calls_per_step']} | {x['us_per_call_min']:.0f} | {x['step_ms_median']:.2f} "
          f"| {full}/{x['decode_steps'][0]} | {'yes' if x['ok'] else 'no'} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--concurrency", type=_ints, default=[1, 2, 4, 8])
    ap.add_argument("--prompt-tokens", type=_ints, default=[16, 256])
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    model = Path(a.model)
    config = json.loads((model / "config.json").read_text())
    expected = ar.expected_allreduce_calls(config, tensor_parallel_size=2)
    work = Path(tempfile.mkdtemp(prefix="point-share-"))
    trace_dir = work / "traces"
    context = max(a.prompt_tokens) + a.max_tokens
    spec = EngineSpec(model=str(model), tensor_parallel_size=2,
                      args=["--enforce-eager", "--dtype", "float32", "--max-model-len", str(max(512, context)),
                            "--max-num-seqs", str(max(a.concurrency))] + ar.profiler_engine_args(trace_dir),
                      log_path=work / "server.log", startup_timeout_s=600)
    rows = []
    t0 = time.monotonic()
    with Engine(spec) as engine:
        print(f"engine up in {time.monotonic() - t0:.0f} s; tiny model, TP=2, {expected} allreduces expected per "
              f"decode step, {a.max_tokens} tokens a stream; traces in {trace_dir}", flush=True)
        print("| concurrency | prompt tokens | share r0 (r1) | calls/step | us/call | step ms | full-batch steps "
              "| ok |\n|---|---|---|---|---|---|---|---|", flush=True)
        for p in a.prompt_tokens:
            for n in a.concurrency:
                r = ar.measure_allreduce_share(base_url=engine.base_url, model=spec.served_model_name,
                                               trace_dir=trace_dir, prompt=PROMPT, max_tokens=a.max_tokens,
                                               timeout_s=300, expected_ranks=2, expected_calls=expected,
                                               concurrency=n, prompt_tokens=p)
                rows.append(row(r, n, p))
                print_row(rows[-1])
        engine.check_alive()
    for x in rows:
        if x["problems"]:
            print(f"c{x['concurrency']} p{x['prompt_tokens']}: {x['problems']}")
    if a.json:
        a.json.write_text(json.dumps({"expected_calls_per_step": expected, "max_tokens": a.max_tokens,
                                      "rows": rows}, indent=1))
    return 0 if all(x["ok"] for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
