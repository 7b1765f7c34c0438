"""What the service's rule (benchsite.regressions.detect.sensitivity) finds on generated series, and what
each recorded series can see with its own noise.

    python benchmarks/sensitivity.py [--reps 40] [--seeds 20261205,1,2] [--json]

Every series is played online, as the service sees it: after each new run it knows the series'
noise from the runs before (sensitivity.noise_estimate over the newest 40, as SeriesNoise keeps
it), takes the rule's bound for decode tok/s (floor 0.5%, 1.5 x noise once 6 starts measured it,
3% before), looks for change points (E-Divisive, min segment 3, p <= 0.001, min change = the bound)
and for a single run beyond the 99.9% prediction interval (a strong verdict), and reports a
change only when one re-run of its commit (a fresh draw at that commit's true level) confirms it
(judging.confirmation_agrees with the series' noise), with one second look as the service does.

Scenarios (60 commits: 40 at level 100, then the step, 20 after; noise-only series of 200):
- steps of 1% and 2% at 0.08% noise (an H200 with CUDA graphs): found within 2 commits means a
  change reported at the step's commit or within 2 commits of it (no later than 10 commits after
  the step); the delay is the number of commits of the new level measured when it was reported
  (a slowdown: 1, the strong verdict and its confirmation; a speed-up waits for the detector's 3);
- steps of 0.2% at 0.08% noise: below the 0.5% floor, never to be reported;
- noise alone at 0.08%, plain and with host hiccups (one run in 25 at -10%): false alarms per
  1,000 points, and those that start at a hiccup;
- steps of 5, 7 and 10% at 2% noise: the figure the fixed 3% had (found within 10 commits);
- the same with the fixed 3% rule beside it, in the same run, on the same series.
Then the recorded engine starts in docs/data (CPU engine, one H200): the noise the rule measures in
each and the smallest change it can see with 2 and 6 starts a side.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchsite.regressions.detect import sensitivity  # noqa: E402  (pure modules: no Django set-up)
from benchsite.regressions.detect.edivisive import detect  # noqa: E402
from benchsite.regressions.detect.judging import (REGRESSION, SECOND_LOOK_AFTER,  # noqa: E402
                                                  confirmation_agrees, judge, robust_noise)
from detection_accuracy import HORIZON, MATCH, rerunner  # noqa: E402

METRIC = "decode_tok_s"
BEFORE, AFTER, NOISE_ONLY = 40, 20, 200
WINDOW = 40  # noise.NOISE_WINDOW
HICCUP_EVERY, HICCUP = 25, -0.10
RECORDED = {  # docs/data files holding decode tok/s of engine starts of one code
    "CPU engine, tiny model, 2 cores (A/A pull request, 20 starts)": ("pr-checks-cpu.json", ["starts"]),
    "CPU engine, tiny model (decode noise, 10 starts)": ("decode-noise-cpu.json", ["runs", "decode_tok_s"]),
    "CPU engine, tiny model (decode noise, 10 starts, again)": ("decode-noise-cpu-2.json", ["runs", "decode_tok_s"]),
    "CPU engine, tiny model (decode noise, 10 starts, pinned)": ("decode-noise-cpu-3.json", ["runs", "decode_tok_s"]),
    "1 x H200, Llama-8B shape, CUDA graphs (8 starts)": ("pr-checks-h200.json", ["starts"]),
}


def level_series(rng, noise, step=None, n=None, hiccups=False):
    """Level 100 (1 + step from BEFORE on) times (1 + noise * N(0, 1)); HICCUPS: every
    HICCUP_EVERY-th run (from a random offset) is 10% slow on top, a host's bad moment."""
    if step is None:
        levels = [100.0] * (n or NOISE_ONLY)
    else:
        levels = [100.0] * BEFORE + [100.0 * (1 + step)] * AFTER
    values = [lv * (1 + noise * rng.gauss(0, 1)) for lv in levels]
    spikes = set()
    if hiccups:
        offset = rng.randrange(HICCUP_EVERY)
        spikes = set(range(offset + 6, len(values), HICCUP_EVERY))
        values = [v * (1 + HICCUP) if i in spikes else v for i, v in enumerate(values)]
    return values, spikes


def fixed_rule(_values_before) -> tuple[float, float | None]:
    """The service before the rule: 3% for decode tok/s, the robust noise for confirmations."""
    return 0.03, None


def noise_rule(values_before) -> tuple[float, float | None]:
    """The rule: the bound from the noise of the runs before; that noise (relative) once known."""
    noise = sensitivity.noise_estimate([(str(i), v) for i, v in enumerate(values_before[-WINDOW:])])
    bound = sensitivity.bound(METRIC, noise=noise)
    return bound.relative, noise.relative if noise is not None and noise.known else None


def reports(values, rule, rerun):
    """[(index of the change, points seen when reported)] as the service alerts."""
    reported, reruns = [], {}
    for t in range(6, len(values) + 1):
        threshold, noise = rule(values[:t - 1])
        found = [(cp.index, cp.before, cp.after) for cp in detect(values[:t], min_change=threshold)]
        start = max([idx for idx, _ in reported if idx < t - 1], default=0)
        verdict = judge(value=values[t - 1], history=values[start:t - 1][-20:], direction="higher", threshold=threshold)
        if verdict["kind"] == REGRESSION and verdict["strong"]:
            found.append((t - 1, verdict["baseline"], values[t - 1]))
        for index, before, after in found:
            if any(abs(index - idx) <= MATCH for idx, _ in reported):
                continue
            if index in reruns and not (reruns[index] == 1 and t - index >= SECOND_LOOK_AFTER):
                continue
            reruns[index] = reruns.get(index, 0) + 1
            width = noise * abs(before) if noise is not None else robust_noise(values[:index][-20:])
            if confirmation_agrees(figure=rerun(index), before=before, after=after, noise=width):
                reported.append((index, t))
    return reported


def play(rng, rerun_rng, rule, noise, step=None, reps=40, hiccups=False, within=2, n=None):
    """Over REPS series (alternately down and up; noise alone when STEP is None): the share found
    (a change reported at the step's commit or within WITHIN commits of it, no later than HORIZON
    commits after the step), the delays (commits of the new level measured when first reported),
    and the false alarms (changes reported further than MATCH from the step)."""
    found, delays, down_delays = 0, [], []
    false = from_hiccups = points = 0
    for rep in range(reps):
        signed = None if step is None else (-step if rep % 2 == 0 else step)
        values, spikes = level_series(rng, noise, signed, n=n, hiccups=hiccups)
        points += len(values)
        delay = None
        for index, seen in reports(values, rule, rerunner(rerun_rng, noise, BEFORE if step else None, signed or 0.0)):
            if step is not None and abs(index - BEFORE) <= within and seen - BEFORE <= HORIZON:
                delay = seen - BEFORE if delay is None else delay
            elif step is None or abs(index - BEFORE) > MATCH:
                false += 1
                from_hiccups += any(abs(index - s) <= 1 for s in spikes)
        if delay is not None:
            found += 1
            delays.append(delay)
            if signed < 0:
                down_delays.append(delay)
    return {"found": found / reps if step is not None else None, "false_alarms": false, "from_hiccups": from_hiccups,
            "points": points, "false_per_1000": 1000 * false / points,
            "median_delay": statistics.median(delays) if delays else None,
            "median_delay_regressions": statistics.median(down_delays) if down_delays else None}


SCENARIOS = [  # name, noise, step, within, hiccups, rules
    ("1% steps at 0.08% noise", 0.0008, 0.01, 2, False),
    ("2% steps at 0.08% noise", 0.0008, 0.02, 2, False),
    ("0.2% steps at 0.08% noise (below the floor)", 0.0008, 0.002, 10, False),
    ("noise alone at 0.08%", 0.0008, None, 0, False),
    ("noise alone at 0.08%, a -10% hiccup every 25 runs", 0.0008, None, 0, True),
    ("5% steps at 2% noise", 0.02, 0.05, 10, False),
    ("7% steps at 2% noise", 0.02, 0.07, 10, False),
    ("10% steps at 2% noise", 0.02, 0.10, 10, False),
    ("noise alone at 2%", 0.02, None, 0, False),
]


RULES = (("noise rule", noise_rule), ("fixed 3%", fixed_rule))


def generated(reps: int, seed: int) -> list[dict]:
    rows = []
    for k, (name, noise, step, within, hiccups) in enumerate(SCENARIOS):
        for rule_name, rule in RULES:
            rng, rerun_rng = random.Random(seed + 1000 * k), random.Random(seed - 1000 * k)  # same series per rule
            n_reps = reps if step is not None else max(10, reps // 2)
            row = play(rng, rerun_rng, rule, noise, step, n_reps, hiccups, within)
            rows.append({"scenario": name, "rule": rule_name, "seed": seed, "noise": noise, "step": step,
                         "within": within, "series": n_reps, **row})
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Over the seeds, per scenario and rule: found (mean, min, max over seeds), false alarms per
    1,000 points (pooled); then 5-10% steps at 2% noise together, with every 2% series' alarms."""
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["rule"]), []).append(r)
    for scenario, noise, step, within, hiccups in SCENARIOS:
        for rule_name, _ in RULES:
            mine = groups.get((scenario, rule_name), [])
            out.append(_pooled(scenario, rule_name, mine))
    for rule_name, _ in RULES:
        two = [r for r in rows if r["rule"] == rule_name and r["noise"] == 0.02]
        steps = [r for r in two if r["step"] is not None]
        row = _pooled("5-10% steps at 2% noise, every 2% series' alarms", rule_name, two)
        per_seed = {}
        for r in steps:
            hit, n = per_seed.get(r["seed"], (0.0, 0))
            per_seed[r["seed"]] = (hit + r["found"] * r["series"], n + r["series"])
        shares = [hit / n for hit, n in per_seed.values()]
        row["found"] = sum(h for h, _ in per_seed.values()) / max(1, sum(n for _, n in per_seed.values()))
        row["found_range"] = [min(shares), max(shares)] if shares else None
        out.append(row)
    return out


def _pooled(scenario: str, rule: str, rows: list[dict]) -> dict:
    found = [r["found"] for r in rows if r["found"] is not None]
    false, points = sum(r["false_alarms"] for r in rows), sum(r["points"] for r in rows)
    return {"scenario": scenario, "rule": rule, "seeds": len({r["seed"] for r in rows}),
            "found": statistics.fmean(found) if found else None,
            "found_range": [min(found), max(found)] if found else None,
            "false_alarms": false, "points": points, "false_per_1000": 1000 * false / max(1, points),
            "from_hiccups": sum(r["from_hiccups"] for r in rows)}


def _figures(path: Path, keys: list[str]) -> list[float]:
    data = json.loads(path.read_text())
    first = data[keys[0]]
    return [float(x[keys[1]]) for x in first] if len(keys) > 1 else [float(x) for x in first]


def recorded() -> list[dict]:
    rows = []
    for name, (file, keys) in RECORDED.items():
        path = ROOT / "docs" / "data" / file
        if not path.exists():
            continue
        starts = _figures(path, keys)
        noise = sensitivity.noise_estimate([("same", v) for v in starts])  # one code: every start is same-code
        bound = sensitivity.bound(METRIC, noise=noise)
        rows.append({"series": name, "file": f"docs/data/{file}", "starts": len(starts),
                     "cv": statistics.stdev(starts) / statistics.fmean(starts), "noise": noise.relative,
                     "threshold": bound.relative, "source": bound.source,
                     "seen_2": sensitivity.visible_change(noise, 2, bound.relative),
                     "seen_6": sensitivity.visible_change(noise, 6, bound.relative)})
    return rows


def _num(x) -> str:
    return "–" if x is None else f"{x:g}"


def _pct(x, digits=2):
    return "–" if x is None else f"{x * 100:.{digits}f}%"


def markdown(summ: list[dict], rec: list[dict]) -> str:
    lines = ["| scenario | rule | found: mean over seeds (range) | false alarms / 1000 points | of them at a hiccup |",
             "|---|---|---|---|---|"]
    for r in summ:
        found = "–" if r["found"] is None else f"{r['found'] * 100:.1f}%"
        if r.get("found_range") and r["seeds"] > 1:
            found += f" ({r['found_range'][0] * 100:.0f}-{r['found_range'][1] * 100:.0f}%)"
        lines.append(f"| {r['scenario']} | {r['rule']} | {found} | {r['false_per_1000']:.2f} "
                     f"({r['false_alarms']} in {r['points']}) | {r['from_hiccups']} |")
    lines += ["", "| recorded starts | starts | CV | noise (rule) | threshold | seen with 2 starts | with 6 |",
              "|---|---|---|---|---|---|---|"]
    for r in rec:
        lines.append(f"| {r['series']} | {r['starts']} | {_pct(r['cv'])} | {_pct(r['noise'])} | "
                     f"{_pct(r['threshold'], 1)} ({r['source']}) | {_pct(r['seen_2'], 1)} | {_pct(r['seen_6'], 1)} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40, help="series per step scenario (noise-only: half, at least 10)")
    parser.add_argument("--seeds", default="20261205,1,2", help="comma-separated seeds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.reps < 1:
        raise SystemExit("--reps must be at least 1")
    try:
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"--seeds takes integers separated by commas, not {args.seeds!r}") from None
    started = time.monotonic()
    gen = [row for seed in seeds for row in generated(args.reps, seed)]
    summ, rec = summary(gen), recorded()
    if args.json:
        print(json.dumps({"seeds": seeds, "reps": args.reps, "summary": summ, "generated": gen, "recorded": rec,
                          "k": sensitivity.K, "floors": sensitivity.FLOORS, "min_starts": sensitivity.MIN_STARTS,
                          "seconds": round(time.monotonic() - started, 1)}, indent=2))
        return
    print(markdown(summ, rec))
    print(f"\nseeds {seeds}, {args.reps} series per step scenario; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
