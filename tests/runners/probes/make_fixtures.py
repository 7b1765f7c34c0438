"""Regenerate the trimmed CPU trace fixtures from a real capture (not collected by pytest).

    python tests/runners/probes/make_fixtures.py TRACE_DIR

TRACE_DIR holds one `*_rank{N}.*.pt.trace.json.gz` per rank written by vLLM's torch profiler
(runners.probes.allreduce.measure_allreduce_share on the tiny model, CPU, TP=2). Each rank's
trace is cut to the prefill step, the first DECODE_STEPS decode steps and the final empty
step (`execute_context_0(0)_generation_0(0)`), keeping every event (all threads, metadata)
that starts inside those windows, and written gzipped as cpu_tp2_rank{N}.pt.trace.json.gz.
"""
import gzip
import json
import re
import sys
from pathlib import Path

DECODE_STEPS = 4
OUT = Path(__file__).resolve().parent / "data"


def trim(src: Path, dst: Path) -> None:
    data = json.loads(gzip.decompress(src.read_bytes()))
    events = data["traceEvents"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("execute_")), key=lambda e: e["ts"])
    decode = [e for e in steps if e["name"].startswith("execute_context_0(0)_generation_1")]
    windows = [s for s in steps if not s["name"].startswith("execute_context_0(0)_generation_1")]
    windows += decode[:DECODE_STEPS]
    spans = [(w["ts"], w["ts"] + w["dur"]) for w in windows]
    kept = [e for e in events if e.get("ph") != "X" or e.get("cat") == "Trace"
            or any(a <= e.get("ts", -1) <= b for a, b in spans)]
    for e in kept:
        if e.get("cat") == "Trace":  # the whole-session span
            e["dur"] = max(b for _, b in spans) - e["ts"]
    data["traceEvents"] = kept
    dst.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), 9, mtime=0))
    print(f"{dst.name}: {len(kept)} of {len(events)} events, {dst.stat().st_size} bytes")


def main(trace_dir: str) -> None:
    OUT.mkdir(exist_ok=True)
    for src in sorted(Path(trace_dir).glob("*.pt.trace.json.gz")):
        m = re.search(r"_rank(\d+)\.", src.name)
        if m:
            trim(src, OUT / f"cpu_tp2_rank{m.group(1)}.pt.trace.json.gz")


if __name__ == "__main__":
    main(sys.argv[1])
