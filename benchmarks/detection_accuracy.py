"""Accuracy of the change-point detector against two simple rules, on generated series.

    python benchmarks/detection_accuracy.py [--reps 20] [--seeds 20261130,1,2] [--noise 1,2,3,5]
                                            [--method TEXT ...] [--json]

Series: 40 points at level 100, then a step of 2, 3, 5, 7 or 10% (alternately down and up)
and 20 more points; and series of noise alone (200 points). Noise: each point is
level * (1 + noise * N(0, 1)) for noise 1, 2, 3 and 5%. Seeded: the same series every time for a
seed; every seed is a row of its own, and a summary gives the mean and range over the seeds (the
service's constants were chosen on other seeds, 11, 22 and 33, so these rows are not fitted).

Every method is run online, as the service sees a series: after each new point it looks at
everything so far. A step counts as found when a change is reported within 3 points of it
(the service's matching window) no later than 10 points after it; the delay is the number of
points after the step that were in when it was first reported (E-Divisive needs its minimum
segment, 3). A report away from the step is a false alarm (a late report at the step is not);
they are counted per 1,000 points over all series (steps and noise alone) of that noise level,
and separately over the noise-alone series (the rest are step series' changes named more than 3
points from the step: a 2-3% step at 2% noise is hard to place).

Methods:
- E-Divisive means, the service's detector (benchsite.regressions.detect.edivisive: min segment 3,
  p <= 0.001 after the 1 + ln k scan correction), with no minimum change and with the decode
  default of 3%; and what the service alerts on: each change found (3%), or a single run beyond
  the 99.9% prediction interval of the runs before it (a strong regression verdict), confirmed by
  one re-run of its commit (a fresh draw at that commit's true level) judged as the service judges
  it (judging.confirmation_agrees: beyond the old level by the series' robust noise and a third of
  the change), with one second re-run of a change still found SECOND_LOOK_AFTER points on after
  its first re-run disagreed (what the service does); with one re-run only; and
  with the first rule (the re-run nearer the new level);
- "more than X% off the last result" for X = 3 and 5;
- conbench's lookback z-score: z of the new point against the mean and standard deviation of the
  previous 20 points, alarm when |z| > 5 (conbench's default threshold).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchsite.regressions.detect.edivisive import detect  # noqa: E402  (pure modules: no Django set-up)
from benchsite.regressions.detect.judging import (REGRESSION, SECOND_LOOK_AFTER,  # noqa: E402
                                                  confirmation_agrees, judge, robust_noise)

NOISES = (0.01, 0.02, 0.03, 0.05)
STEPS = (0.02, 0.03, 0.05, 0.07, 0.10)
BEFORE, AFTER, NOISE_ONLY = 40, 20, 200
MATCH, HORIZON = 3, 10


def series(rng, noise, step=None, n=None):
    if step is None:
        return [100 * (1 + noise * rng.gauss(0, 1)) for _ in range(n or NOISE_ONLY)]
    return ([100 * (1 + noise * rng.gauss(0, 1)) for _ in range(BEFORE)]
            + [100 * (1 + step) * (1 + noise * rng.gauss(0, 1)) for _ in range(AFTER)])


# --- online reports: (index of the change, number of points seen when first reported) --------


def _strong_verdict(values, t, reported, min_change):
    """The service's other path: the newest run alone, judged against up to 20 runs since the
    last reported change, beyond the 99.9% prediction interval -> (index, before, after)."""
    start = max([idx for idx, _ in reported if idx < t - 1], default=0)
    history = values[start:t - 1][-20:]
    verdict = judge(value=values[t - 1], history=history, direction="higher", threshold=min_change)
    if verdict["kind"] == REGRESSION and verdict["strong"]:
        return t - 1, verdict["baseline"], values[t - 1]
    return None


def _midpoint(*, figure, before, after, noise):
    """The confirmation rule before 2026-11-30: the re-run nearer the level after than before."""
    return confirmation_agrees(figure=figure, before=before, after=after, noise=None)


_DETECTED: dict = {}  # (values, min_change) -> reports: methods share a noise level's series


def _detect(values, min_change):
    key = (tuple(values), min_change)
    if key not in _DETECTED:
        _DETECTED[key] = [(cp.index, cp.before, cp.after) for cp in detect(values, min_change=min_change)]
    return _DETECTED[key]


def _may_rerun(index: int, t: int, reruns: dict[int, int], second_look: int | None) -> bool:
    """The service's rule for one more confirmation run of the change at `index`, seen with `t`
    points: the first one; a second (SECOND_LOOK) only when the detector still finds the same
    change with `second_look` points after it."""
    if index not in reruns:
        return True
    return second_look is not None and reruns[index] == 1 and t - index >= second_look


def reports_edivisive(values, min_change, rerun=None, agrees=confirmation_agrees, second_look=None):
    """`rerun(index)`: a fresh measurement of the commit at `index` (the service's confirmation
    run); when given, a change (from the detector, or from a strong regression verdict) is
    reported only if the re-run agrees (`agrees`: the service's judging.confirmation_agrees).
    `second_look`: a change whose re-run disagreed is re-run once more when the detector still
    finds it with that many points after it (the service's judging.SECOND_LOOK_AFTER)."""
    reported: list[tuple[int, int]] = []
    reruns: dict[int, int] = {}  # re-runs per commit, as the service stores a change once
    for t in range(6, len(values) + 1):
        found = list(_detect(values[:t], min_change))
        if rerun is not None and (strong := _strong_verdict(values, t, reported, min_change)):
            found.append(strong)
        for index, before, after in found:
            if any(abs(index - idx) <= MATCH for idx, _ in reported):
                continue
            if rerun is not None:
                if not _may_rerun(index, t, reruns, second_look):
                    continue
                reruns[index] = reruns.get(index, 0) + 1
                again = rerun(index)
                noise = robust_noise(values[:index][-20:])  # as the service: the runs before the change
                if not agrees(figure=again, before=before, after=after, noise=noise):
                    continue  # disagreed: no alert; a later detection at another commit is re-run
            reported.append((index, t))
    return reported


def reports_last_result(values, x):
    return [(i, i + 1) for i in range(1, len(values)) if abs(values[i] / values[i - 1] - 1) > x]


def reports_zscore(values, window=20, z=5.0):
    out = []
    for i in range(window, len(values)):
        past = values[i - window:i]
        sd = statistics.stdev(past)
        if sd > 0 and abs(values[i] - statistics.fmean(past)) / sd > z:
            out.append((i, i + 1))
    return out


METHODS = {
    "E-Divisive (min change 0)": lambda v, rerun: reports_edivisive(v, 0.0),
    "E-Divisive (min change 3%)": lambda v, rerun: reports_edivisive(v, 0.03),
    "E-Divisive (3%) + confirmation re-run, second look (the service's alerts)": lambda v, rerun: reports_edivisive(
        v, 0.03, rerun, second_look=SECOND_LOOK_AFTER),
    "E-Divisive (3%) + one confirmation re-run (the alerts before)": lambda v, rerun: reports_edivisive(v, 0.03, rerun),
    "E-Divisive (3%) + re-run, midpoint rule (the first alerts)": lambda v, rerun: reports_edivisive(
        v, 0.03, rerun, _midpoint),
    "last result > 3% off": lambda v, rerun: reports_last_result(v, 0.03),
    "last result > 5% off": lambda v, rerun: reports_last_result(v, 0.05),
    "conbench lookback z-score (20, |z|>5)": lambda v, rerun: reports_zscore(v),
}


def score(reports, step_at):
    """(delay or None, false alarms) of one series. A report at the step (within MATCH) after
    it happened is the step found (late when beyond HORIZON), never a false alarm."""
    delay, false = None, 0
    for idx, seen in reports:
        at_step = step_at is not None and abs(idx - step_at) <= MATCH and seen > step_at
        if at_step and delay is None and seen - step_at <= HORIZON:
            delay = seen - step_at
        elif not at_step:
            false += 1
    return delay, false


def rerunner(rng, noise, step_at=None, step=0.0):
    """A fresh measurement of the commit at an index: its true level, new noise."""
    def rerun(index):
        level = 100 * (1 + step) if step_at is not None and index >= step_at else 100
        return level * (1 + noise * rng.gauss(0, 1))
    return rerun


SEEDS = (20261130, 1, 2)


def evaluate(reps: int, seed: int = SEEDS[0], noises=NOISES, methods=None) -> list[dict]:
    rows = []
    for noise in noises:
        _DETECTED.clear()
        for name, method in METHODS.items():
            if methods and not any(m.lower() in name.lower() for m in methods):
                continue
            rng = random.Random(seed + int(noise * 1000))  # the same series for every method
            rerun_rng = random.Random(seed - int(noise * 1000))
            found = {s: [] for s in STEPS}
            false_alarms = points = noise_false = noise_points = 0
            for rep in range(reps):
                for s in STEPS:
                    sign = -1 if rep % 2 == 0 else 1
                    values = series(rng, noise, sign * s)
                    delay, false = score(method(values, rerunner(rerun_rng, noise, BEFORE, sign * s)), BEFORE)
                    found[s].append(delay)
                    false_alarms, points = false_alarms + false, points + len(values)
            for _ in range(max(1, reps // 2)):
                values = series(rng, noise)
                false = score(method(values, rerunner(rerun_rng, noise)), None)[1]
                false_alarms, points = false_alarms + false, points + len(values)
                noise_false, noise_points = noise_false + false, noise_points + len(values)
            rows.append({"noise": noise, "method": name, "seed": seed, "points": points,
                         "false_per_1000": 1000 * false_alarms / points,
                         "noise_only_false_per_1000": 1000 * noise_false / noise_points,
                         "detected": {s: sum(d is not None for d in found[s]) / reps for s in STEPS},
                         "median_delay": {s: statistics.median([d for d in found[s] if d is not None])
                                          if any(d is not None for d in found[s]) else None for s in STEPS},
                         "max_delay": {s: max([d for d in found[s] if d is not None], default=None) for s in STEPS},
                         "big_within_5": sum(d is not None and d <= 5 for s in STEPS if s >= 0.05 for d in found[s])
                         / (reps * sum(s >= 0.05 for s in STEPS))})
    return rows


def markdown(rows) -> str:
    head = ("| noise | seed | method | " + " | ".join(f"{int(s * 100)}% found" for s in STEPS)
            + " | delay >=5% (median / max) | >=5% found within 5 | false alarms / 1000 pts "
            "| of them on noise alone |")
    lines = [head, "|" + "---|" * (len(STEPS) + 7)]
    for r in rows:
        big = [s for s in STEPS if s >= 0.05]
        med = [r["median_delay"][s] for s in big if r["median_delay"][s] is not None]
        mx = [r["max_delay"][s] for s in big if r["max_delay"][s] is not None]
        delay = f"{statistics.median(med):.0f} / {max(mx)}" if mx else "–"
        lines.append(f"| {r['noise'] * 100:.0f}% | {r['seed']} | {r['method']} | "
                     + " | ".join(f"{r['detected'][s] * 100:.0f}%" for s in STEPS)
                     + f" | {delay} | {r['big_within_5'] * 100:.0f}% | {r['false_per_1000']:.2f} "
                     f"| {r['noise_only_false_per_1000']:.2f} |")
    return "\n".join(lines)


def summary(rows) -> str:
    """Per noise level and method, over the seeds: >=5% found within 5 and false alarms (mean, range)."""
    lines = ["| noise | method | seeds | >=5% found within 5: mean (min-max) | false alarms / 1000 pts: mean (min-max) |",
             "|---|---|---|---|---|"]
    keys = sorted({(r["noise"], r["method"]) for r in rows}, key=lambda k: (k[0], list(METHODS).index(k[1])))
    for noise, method in keys:
        mine = [r for r in rows if (r["noise"], r["method"]) == (noise, method)]
        w = [r["big_within_5"] * 100 for r in mine]
        f = [r["false_per_1000"] for r in mine]
        lines.append(f"| {noise * 100:.0f}% | {method} | {len(mine)} | {statistics.fmean(w):.1f}% ({min(w):.0f}-{max(w):.0f}%) "
                     f"| {statistics.fmean(f):.2f} ({min(f):.2f}-{max(f):.2f}) |")
    return "\n".join(lines)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) / 100 for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--noise takes percentages separated by commas (e.g. 2,3), not {text!r}") from None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20, help="series per step size and noise level")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds, one table row each")
    parser.add_argument("--noise", default=",".join(f"{n * 100:g}" for n in NOISES), help="noise levels in %%")
    parser.add_argument("--method", action="append", default=[], help="only methods whose name contains this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"--seeds takes integers separated by commas, not {args.seeds!r}") from None
    started = time.monotonic()
    rows = [r for seed in seeds for r in evaluate(args.reps, seed, _floats(args.noise), args.method)]
    rows.sort(key=lambda r: (r["noise"], list(METHODS).index(r["method"]), seeds.index(r["seed"])))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(markdown(rows))
        print()
        print(summary(rows))
        print(f"\n{args.reps} series per step and noise level, {max(1, args.reps // 2)} noise-only series of "
              f"{NOISE_ONLY} points per noise level, seeds {seeds}; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
