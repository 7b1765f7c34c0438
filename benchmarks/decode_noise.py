"""Run-to-run noise of decode tok/s on the CPU engine: how much a number moves on its own.

    .venv/bin/python benchmarks/decode_noise.py [--runs 10] [--repeats 5] [--max-tokens 128]
        [--model var/tiny-model] [--pin-client CPU] [--json out.json]

Starts the engine RUNS times (each with its own `vllm serve` start: eager, float32, the tiny
model, as the test suite's engines) and measures each with the decode probe (1 warmup, REPEATS
timed requests, more when fewer than 3 are clean). Reports:

- across runs: the coefficient of variation (sample stdev / mean) of the runs' decode tok/s
  (each run's figure is the probe's median over its clean repeats): what a verdict between two
  commits must beat;
- within runs: the CV of the clean repeats of each run, median over runs;
- flagged repeats (held back to one burst, or too short a steady window) and repeats whose
  held-back start/end was measured around, with the extra requests they cost;
- the server's own decode tok/s (vLLM's /metrics) next to the client's, per run.

--pin-client CPU pins this process (the client) to one core; the engine binds its OpenMP
threads itself (VLLM_CPU_OMP_THREADS_BIND=auto: core 0, with core 1 reserved on 2 cores).
On a shared host the load average is recorded with each run: figures under load are noise
of the host, not of the engine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes.decode import measure_decode  # noqa: E402

ENGINE_ARGS = ["--enforce-eager", "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"]
PROMPT = "The history of computing began with"


def cv(values: list[float]) -> float | None:
    """Coefficient of variation: sample standard deviation / mean (None under 2 values)."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) / statistics.mean(values)


def one_run(i: int, *, model: str, repeats: int, max_tokens: int, log_dir: Path) -> dict:
    """Start the engine, measure, stop it: one run's figures."""
    load_before = os.getloadavg()[0]
    spec = EngineSpec(model=model, args=ENGINE_ARGS, log_path=log_dir / f"run-{i}.log", startup_timeout_s=300)
    t0 = time.perf_counter()
    with Engine(spec) as engine:
        startup_s = time.perf_counter() - t0
        r = measure_decode(base_url=engine.base_url, model=spec.served_model_name, prompt=PROMPT,
                           max_tokens=max_tokens, repeats=repeats, warmup=1)
    clean = [s["decode_tok_s"] for s in r["samples"] if not s["flag"]]
    return {
        "run": i, "decode_tok_s": r["decode_tok_s"], "clean_samples": clean,
        "flags": [s["flag"] for s in r["samples"]],
        "held_back": sum(1 for s in r["samples"] if s["held_back"] and not s["flag"]),
        "repeats_made": r["repeats_made"], "within_cv": cv(clean),
        "server_decode_tok_s": (r.get("server_metrics") or {}).get("decode_tok_s"),
        "server_agreement": r.get("server_agreement"), "startup_s": startup_s,
        "load_before": load_before, "load_after": os.getloadavg()[0], "warnings": r["warnings"],
    }


def summarize(runs: list[dict], *, repeats: int) -> dict:
    figures = [r["decode_tok_s"] for r in runs]
    within = [r["within_cv"] for r in runs if r["within_cv"] is not None]
    flags = [f for r in runs for f in r["flags"]]
    return {
        "runs": len(runs), "repeats_asked": repeats,
        "decode_tok_s_mean": statistics.mean(figures), "decode_tok_s_min": min(figures),
        "decode_tok_s_max": max(figures),
        "cv_across_runs": cv(figures),
        "cv_within_runs_median": statistics.median(within) if within else None,
        "repeats_made": len(flags), "repeats_flagged": sum(1 for f in flags if f),
        "flags": {f: flags.count(f) for f in sorted(set(flags)) if f},
        "repeats_held_back_measured": sum(r["held_back"] for r in runs),
        "extra_repeats": sum(r["repeats_made"] - repeats for r in runs),
        "load_average_range": [min(r["load_before"] for r in runs), max(r["load_after"] for r in runs)],
    }


def format_report(runs: list[dict], summary: dict) -> str:
    lines = ["run  tok/s    clean repeats                     CV within  flags         server tok/s  load"]
    for r in runs:
        flagged = ",".join(f for f in r["flags"] if f) or "-"
        server = f"{r['server_decode_tok_s']:.1f}" if r["server_decode_tok_s"] else "-"
        within = f"{r['within_cv']:.1%}" if r["within_cv"] is not None else "-"
        lines.append(f"{r['run']:>3}  {r['decode_tok_s']:7.1f}  {' '.join(f'{x:.1f}' for x in r['clean_samples']):32}  "
                     f"{within:>9}  {flagged:12}  {server:>12}  {r['load_before']:.1f}")
    s = summary
    lines += ["",
              f"CV across {s['runs']} runs (each its own engine start): {s['cv_across_runs']:.2%} "
              f"(mean {s['decode_tok_s_mean']:.1f} tok/s, {s['decode_tok_s_min']:.1f}..{s['decode_tok_s_max']:.1f})",
              f"CV within runs (clean repeats), median over runs: {s['cv_within_runs_median']:.2%}",
              f"repeats: {s['repeats_made']} made ({s['extra_repeats']} extra), {s['repeats_flagged']} flagged "
              f"{s['flags'] or ''}, {s['repeats_held_back_measured']} measured around a held-back start/end",
              f"load average {s['load_average_range'][0]:.1f}..{s['load_average_range'][1]:.1f} "
              f"on {os.cpu_count()} CPUs"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="engine starts (default 10)")
    ap.add_argument("--repeats", type=int, default=5, help="timed requests per run (default 5)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--pin-client", type=int, metavar="CPU", help="pin this process (the client) to one core")
    ap.add_argument("--json", metavar="FILE", help="also write runs and summary as JSON")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error("--runs must be at least 2 to give a coefficient of variation")
    if args.pin_client is not None:
        os.sched_setaffinity(0, {args.pin_client})
    runs = []
    with tempfile.TemporaryDirectory(prefix="decode-noise-") as tmp:
        for i in range(args.runs):
            runs.append(one_run(i, model=args.model, repeats=args.repeats, max_tokens=args.max_tokens,
                                log_dir=Path(tmp)))
            print(f"run {i}: {runs[-1]['decode_tok_s']:.1f} tok/s", file=sys.stderr, flush=True)
    summary = summarize(runs, repeats=args.repeats)
    print(format_report(runs, summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
