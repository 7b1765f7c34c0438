"""The decode probe at concurrency N against the exact-cadence token server: each stream's rate
and each repeat's aggregate against the truth, and the client's saturation rate.

    .venv/bin/python benchmarks/probe_concurrency.py [--json out.json] [--concurrency 8,16,64]

For each concurrency C the token server (tests/runners/probes/token_server.py, its own process)
serves C streams at once, their cadences cycling through CADENCE_MIX x the base cadence (so the
streams of one repeat have different rates), and records the true send time of every chunk of
every stream. runners.probes.streams.measure_point (1 warmup round, REPEATS timed ones) measures
them; every stream is matched with the server's record of it by its completion id.

  stream error     |probe stream tok/s - truth| / truth, truth = (n - k_first) / (t_sent_last -
                   t_sent_first) of that stream; median, p90 and worst over the clean streams
  aggregate error  per repeat, against all the repeat's tokens sent after its first token /
                   (last send - first send); the worst repeat
  events/s         token chunks per second the client took, all streams together (the truth's
                   aggregate rate: the server's send times, not the nominal cadence)

Saturation: the base cadence is lowered step by step (SWEEP_MS) at each concurrency; the client's
saturation rate is the highest events/s at which the p90 stream error stayed under
SATURATION_ERROR (0.5%) and no stream was flagged, before the first step that failed. Rows taken
above it are marked `ABOVE SATURATION`: their figures describe the client, not the server. The
server is a Python process beside the probe on the same cores, so it saturates too (its send
times stay the truth, only the rate it reaches drops); the figures are from one run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:  # run as a script: make `runners` and probe_fidelity importable
        sys.path.insert(0, str(path))

from probe_fidelity import TokenServer  # noqa: E402

from runners.analysis import stats  # noqa: E402
from runners.probes.client import ProbeError  # noqa: E402
from runners.probes.streams import measure_point  # noqa: E402

MODEL = "fake-model"
CONCURRENCIES = (8, 16, 64)
CADENCE_MIX = (1.0, 1.3, 1.7)  # stream cadences, as multiples of the base cadence
SWEEP_MS = (40.0, 20.0, 10.0, 5.0, 2.5, 1.25)  # base cadences, slowest first
SATURATION_ERROR = 0.005
MAX_TOKENS = 64
REPEATS = 3


def stream_truth(record: dict) -> float:
    chunks = record["chunks"]
    return (sum(c["k"] for c in chunks) - chunks[0]["k"]) / (chunks[-1]["sent"] - chunks[0]["sent"])


def aggregate_truth(records: list[dict]) -> float:
    first = min((r["chunks"][0] for r in records), key=lambda c: c["sent"])
    end = max(r["chunks"][-1]["sent"] for r in records)
    return (sum(c["k"] for r in records for c in r["chunks"]) - first["k"]) / (end - first["sent"])


def measure_row(server: TokenServer, concurrency: int, base_ms: float, max_tokens: int = MAX_TOKENS,
                repeats: int = REPEATS) -> dict:
    """One concurrency at one base cadence: the probe's figures against the server's records."""
    cadences = "_".join(f"{base_ms * m:g}" for m in CADENCE_MIX)
    scenario = f"cadences={cadences},ttft_ms=20,tag=conc-{uuid.uuid4().hex[:8]}"
    cpu0 = time.process_time()
    result = measure_point(base_url=server.url(scenario), model=MODEL, max_tokens=max_tokens, repeats=repeats,
                           warmup=1, concurrency=concurrency, prompt="hello", timeout_s=60)
    cpu = time.process_time() - cpu0
    by_id = {r["id"]: r for r in server.log(scenario)}
    errors, agg_errors, events = [], [], []
    for i in range(repeats):
        entries = [s for s in result["streams"] if s["repeat"] == i]
        records = [by_id[s["response_id"]] for s in entries]
        errors += [abs(s["decode_tok_s"] - stream_truth(r)) / stream_truth(r)
                   for s, r in zip(entries, records) if not s["flags"]["flag"]]
        truth = aggregate_truth(records)
        events.append(truth)  # one token per chunk: tokens/s are events/s
        agg = result["aggregate_tok_s_per_repeat"][i]
        agg_errors.append(abs(agg - truth) / truth if agg else None)
    flagged = sum(1 for s in result["streams"] if s["flags"]["flag"])
    return {"concurrency": concurrency, "base_cadence_ms": base_ms, "cadences_ms": cadences,
            "nominal_events_s": concurrency * 1000 / base_ms * stats.mean([1 / m for m in CADENCE_MIX]),
            "events_s": stats.median(events), "streams": len(result["streams"]), "flagged": flagged,
            "stream_err_median": stats.median(errors) if errors else None,
            "stream_err_p90": stats.percentile(errors, 90) if errors else None,
            "stream_err_max": max(errors) if errors else None,
            "aggregate_err_max": max((e for e in agg_errors if e is not None), default=None),
            "probe_cpu_s": cpu, "ttft_ms_p50": result["ttft_ms_percentiles"]["p50"],
            "warnings": result["warnings"][:5]}


def passes(row: dict) -> bool:
    return row["flagged"] == 0 and row["stream_err_p90"] is not None and row["stream_err_p90"] < SATURATION_ERROR


def sweep(server: TokenServer, concurrency: int, log=print) -> dict:
    """Rows from the slowest base cadence down until one fails (one failing row is kept); the
    saturation rate is the highest events/s of the passing rows before it."""
    rows, saturation = [], None
    for base_ms in SWEEP_MS:
        try:
            row = measure_row(server, concurrency, base_ms)
        except ProbeError as e:  # the client (or the server beside it) gave up: past saturation
            row = {"concurrency": concurrency, "base_cadence_ms": base_ms, "error": e.message, "events_s": None}
            rows.append(row)
            log(f"C={concurrency} base {base_ms:g} ms: probe failed: {e.message}")
            break
        rows.append(row)
        log(format_row(row))
        if not passes(row):
            break
        saturation = max(saturation or 0.0, row["events_s"])
    for row in rows:
        row["above_saturation"] = saturation is None or row["events_s"] is None or row["events_s"] > saturation
    return {"concurrency": concurrency, "rows": rows, "saturation_events_s": saturation}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3%}"


def format_row(row: dict) -> str:
    if "error" in row:
        return f"C={row['concurrency']:<3} base {row['base_cadence_ms']:>5g} ms  probe failed: {row['error']}"
    mark = "  ABOVE SATURATION" if row.get("above_saturation") else ""
    return (f"C={row['concurrency']:<3} base {row['base_cadence_ms']:>5g} ms  {row['events_s']:>8.0f} events/s  "
            f"stream err median {_pct(row['stream_err_median'])} p90 {_pct(row['stream_err_p90'])} max "
            f"{_pct(row['stream_err_max'])}  aggregate err max {_pct(row['aggregate_err_max'])}  flagged "
            f"{row['flagged']}/{row['streams']}  probe CPU {row['probe_cpu_s']:.1f} s{mark}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default=",".join(map(str, CONCURRENCIES)))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with TokenServer() as server:
        sweeps = [sweep(server, int(c)) for c in args.concurrency.split(",")]
    print("\nsummary (rows above the client's saturation are marked):")
    for s in sweeps:
        for row in s["rows"]:
            print(format_row(row))
        sat = s["saturation_events_s"]
        print(f"C={s['concurrency']}: saturation {'not reached below the slowest step' if sat is None else f'{sat:.0f} events/s'}")
    doc = {"sweeps": sweeps, "cpu_count": os.cpu_count(), "loadavg_end": os.getloadavg(),
           "wall_s": time.perf_counter() - t0, "saturation_error": SATURATION_ERROR}
    print(f"wall {doc['wall_s']:.0f} s, {doc['cpu_count']} CPUs, load average at the end {doc['loadavg_end']}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
