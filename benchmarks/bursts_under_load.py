"""Bursts under CPU load: how often a loaded host delivers a whole stream at once, and why.

    .venv/bin/python benchmarks/bursts_under_load.py [--busy 3] [--requests 8] [--max-tokens 16]

One CPU engine (the tiny model, eager, as the suite's), started as the service starts it: a
process group of its own in the caller's session. Then the decode probe (1 repeat, no warmup,
more requests when a repeat is flagged) is run REQUESTS times in each of three phases:

  idle            no load;
  load, session   BUSY busy loops started in this session, as every process of a test run or
                  of `make run` is;
  load, own       the same loops started in a session of their own (`setsid`).

With Linux's autogroup scheduling (`/proc/sys/kernel/sched_autogroup_enabled` = 1) every
session is a scheduling group with one share of the CPU. When the load has a session of its
own, the engine's session gets one share for vLLM's busy engine core, its API server and this
client together; the API server starves, and whole streams reach the client in one burst,
which the probe flags (`burst`) and keeps out of every statistic. This is why
runners.engine.process no longer starts the engine in a session of its own. Printed per
phase: the repeats made, how many were clean, burst or held back, and the median clean tok/s.
"""
from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.decode_noise import ENGINE_ARGS, PROMPT  # noqa: E402 (the tiny engine's settings, one place)
from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes.decode import measure_decode  # noqa: E402

BUSY_LOOP = [sys.executable, "-c", "while True: pass"]


def phase(engine: Engine, model: str, *, requests: int, max_tokens: int) -> dict:
    flags: collections.Counter = collections.Counter()
    clean_tok_s = []
    for _ in range(requests):
        r = measure_decode(base_url=engine.base_url, model=model, prompt=PROMPT, max_tokens=max_tokens,
                           repeats=1, warmup=0)
        for s in r["samples"]:
            flags[s["flag"] or "clean"] += 1
            if not s["flag"]:
                clean_tok_s.append(s["decode_tok_s"])
    return {"repeats": sum(flags.values()), **flags,
            "median_clean_tok_s": statistics.median(clean_tok_s) if clean_tok_s else None}


def with_load(busy: int, own_session: bool, run):
    loops = [subprocess.Popen(BUSY_LOOP, start_new_session=own_session) for _ in range(busy)]
    try:
        return run()
    finally:
        for p in loops:
            p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--busy", type=int, default=3)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    a = ap.parse_args(argv)
    autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
    print(f"autogroup: {autogroup.read_text().strip() if autogroup.exists() else 'n/a'}; "
          f"{a.busy} busy loops; {a.requests} probe calls of {a.max_tokens} tokens per phase")
    spec = EngineSpec(model=a.model, args=ENGINE_ARGS, startup_timeout_s=300,
                      log_path=Path(tempfile.mkdtemp(prefix="bursts-")) / "vllm-serve.log")
    with Engine(spec) as engine:
        run = lambda: phase(engine, spec.served_model_name, requests=a.requests, max_tokens=a.max_tokens)  # noqa: E731
        results = {"idle": run(),
                   "load, session": with_load(a.busy, False, run),
                   "load, own": with_load(a.busy, True, run)}
    print(f"{'phase':<14} {'repeats':>7} {'clean':>6} {'burst':>6} {'held':>5} {'clean tok/s':>12}")
    for name, r in results.items():
        tok = "n/a" if r["median_clean_tok_s"] is None else f"{r['median_clean_tok_s']:.1f}"
        print(f"{name:<14} {r['repeats']:>7} {r.get('clean', 0):>6} {r.get('burst', 0):>6} "
              f"{r.get('held_back', 0):>5} {tok:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
