"""Head against base, pure (no database): per variant, every judged metric's change with its
interval on the ratio scale, correctness, the allreduce share and what took effect; then the
comparison's outcome in the words of a run's outcome.

The unit of evidence is an engine start (decode noise lives between starts): each side's run
figures, when both sides have two or more; with fewer, the clean repeats of its runs (the
interval then leaves the noise between starts out, and the row says so). The interval of
head/base - 1 is Welch's on the logarithms, so it never passes -100%."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import fmean, median, variance

from benchsite.bench.lifecycle import outcome as words
from benchsite.regressions.detect.sensitivity import Noise, counts, detectable, short_percent
from benchsite.regressions.detect.sequential import decided, look_quantile
from benchsite.regressions.detect.tstats import t_quantile
from runners import contract

LEVEL = 0.975  # two-sided 95%
HEADLINE = contract.DECODE_TOK_S


@dataclass(frozen=True)
class Side:
    """One run of one side, as the judgement needs it."""

    run_id: int
    state: str
    error: str = ""
    host: str = ""
    figures: dict[str, float] = field(default_factory=dict)           # metric -> the run's figure
    samples: dict[str, list[float]] = field(default_factory=dict)     # metric -> its clean repeats
    methods: dict[str, str] = field(default_factory=dict)             # metric -> how it was measured ("" the original)
    share: float | None = None
    took_effect: str = ""


@dataclass(frozen=True)
class Change:
    effect: float
    ci_low: float | None
    ci_high: float | None
    spread: float | None = None  # the standard deviation of one start's logarithm the interval used


def ratio_change(base: list[float], head: list[float], noise: Noise | None = None,
                 quantile: float = LEVEL) -> Change | None:
    """head/base - 1 from the geometric means, with a two-sided interval on the log scale at
    QUANTILE (0.975: 95%; a check that looks more than once takes sequential.look_quantile):
    Welch's from the two sides alone, or, with the series' NOISE known, Student's with the
    variance pooled from the series' starts and both sides' (pooled); None without positive
    values on both sides; no interval with fewer than two on either."""
    lb, lh = [math.log(v) for v in base if v > 0], [math.log(v) for v in head if v > 0]
    if not lb or not lh:
        return None
    diff = fmean(lh) - fmean(lb)
    if len(lb) < 2 or len(lh) < 2:
        return Change(math.exp(diff) - 1, None, None)
    if noise is not None and noise.known:
        return _pooled(diff, lb, lh, noise, quantile)
    vb, vh = variance(lb) / len(lb), variance(lh) / len(lh)
    se = math.sqrt(vb + vh)
    if se == 0:
        return Change(math.exp(diff) - 1, math.exp(diff) - 1, math.exp(diff) - 1, 0.0)
    df = (vb + vh) ** 2 / ((vb ** 2 / (len(lb) - 1) if vb else 0) + (vh ** 2 / (len(lh) - 1) if vh else 0))
    half = _t(quantile, round(df, 2)) * se
    spread = math.sqrt((variance(lb) * (len(lb) - 1) + variance(lh) * (len(lh) - 1)) / (len(lb) + len(lh) - 2))
    return Change(math.exp(diff) - 1, math.exp(diff - half) - 1, math.exp(diff + half) - 1, spread)


def _pooled(diff: float, lb: list[float], lh: list[float], noise: Noise, quantile: float) -> Change:
    """The interval of DIFF with the log-scale variance pooled from the series' noise (its starts
    less one degrees of freedom; a relative noise is the standard deviation of the logarithm to
    first order) and both sides' own spread: s^2 = (df_series * noise^2 + SS_base + SS_head) /
    (df_series + n_base + n_head - 2), t on those degrees of freedom."""
    df_series = noise.starts - 1
    squares = sum((x - fmean(lb)) ** 2 for x in lb) + sum((x - fmean(lh)) ** 2 for x in lh)
    df = df_series + len(lb) + len(lh) - 2
    pooled_variance = (df_series * noise.relative ** 2 + squares) / df
    half = _t(quantile, round(df, 2)) * math.sqrt(pooled_variance * (1 / len(lb) + 1 / len(lh)))
    return Change(math.exp(diff) - 1, math.exp(diff - half) - 1, math.exp(diff + half) - 1, math.sqrt(pooled_variance))


@lru_cache(maxsize=4096)
def _t(quantile: float, df: float) -> float:
    """Student's quantile for Welch's degrees of freedom, to 0.01 (a resampling asks it millions of times)."""
    return t_quantile(quantile, df)


def _evidence(sides: list[Side], metric: str, per_start: bool) -> list[float]:
    if per_start:
        return [s.figures[metric] for s in sides if metric in s.figures]
    return [v for s in sides for v in s.samples.get(metric, [])]


def metric_change(metric: str, base: list[Side], head: list[Side], threshold: float,
                  noise: Noise | None = None, quantile: float = LEVEL) -> dict | None:
    """{metric, unit, base, head, effect, ci_low, ci_high, threshold, word, evidence, noise,
    decided} or None when a side lacks the metric. NOISE: the series' noise between starts, pooled
    into the interval of engine starts when known (regressions.detect.sensitivity); QUANTILE: the
    interval's (ratio_change). `decided`: whether this look settles the metric
    (sequential.decided; never on repeats, which leave the noise between starts out)."""
    per_start = sum(metric in s.figures for s in base) >= 2 and sum(metric in s.figures for s in head) >= 2
    b, h = _evidence(base, metric, per_start), _evidence(head, metric, per_start)
    pooled = noise if per_start and noise is not None and noise.known else None
    change = ratio_change(b, h, pooled, quantile)
    if change is None:
        return None
    info = contract.METRICS.get(metric)
    direction = info.direction if info else "none"
    fact = words.VerdictFact(metric, _kind(change, direction, threshold), change.effect, change.ci_low,
                             change.ci_high, threshold)
    word = words.INCONCLUSIVE if words.is_inconclusive(fact) else {
        "regression": words.REGRESSED, "improvement": words.IMPROVED, "no_change": words.PASSED}.get(fact.kind)
    if change.ci_low is None:
        word = words.INCONCLUSIVE  # one value a side: no interval, no pass
    return {"metric": metric, "unit": info.unit if info else "", "direction": direction,
            "base": median(s.figures[metric] for s in base if metric in s.figures),
            "head": median(s.figures[metric] for s in head if metric in s.figures),
            "effect": change.effect, "ci_low": change.ci_low, "ci_high": change.ci_high, "threshold": threshold,
            "word": word, "evidence": "engine starts" if per_start else "repeats",
            "noise": {"relative": pooled.relative, "starts": pooled.starts} if pooled else None,
            "decided": per_start and decided(change.effect, change.ci_low, change.ci_high, threshold),
            "spread": change.spread if per_start else None}


def headline_check(base: list[float], head: list[float], *, first: int, cap: int, threshold: float,
                   noise: Noise | None = None) -> tuple[dict, int]:
    """The service's rule on the headline alone, as a check looks at it: the first FIRST figures of
    each side (one per engine start), then one more a side while the change is undecided
    (row_decided), up to CAP; (the last look's change, the starts a side it used). For
    simulations and the resampling benchmark; the service itself looks from the table."""
    quantile = look_quantile(first, cap)
    n = first
    while True:
        sides = [[Side(run_id=i, state="SUCCEEDED", figures={HEADLINE: v}, samples={HEADLINE: [v]})
                  for i, v in enumerate(values[:n])]
                 for values in (base, head)]
        change = metric_change(HEADLINE, sides[0], sides[1], threshold, noise, quantile)
        if n >= cap or (change["decided"] and change["word"] != words.INCONCLUSIVE):
            return change, n
        n += 1


def _kind(change: Change, direction: str, threshold: float) -> str:
    if not counts(effect=change.effect, ci_low=change.ci_low, ci_high=change.ci_high, threshold=threshold):
        return "no_change"
    better = change.effect > 0 if direction == "higher" else change.effect < 0
    return "improvement" if better else "regression"


def worst(found) -> str:
    """The worst word, in the order a commit's runs are (outcome.WORST_FIRST)."""
    found = set(found)
    return next((w for w in words.WORST_FIRST if w in found), words.NOT_JUDGED)


def _failed(base: list[Side], head: list[Side]) -> str:
    for role, sides in (("base", base), ("head", head)):
        bad = [s for s in sides if s.state != "SUCCEEDED"]
        if bad or not sides:
            first = bad[0] if bad else None
            why = (first.error.strip().splitlines() or [first.state.lower()])[0] if first else "no run"
            return f"{role} run #{first.run_id} {first.state.lower()}: {why}" if first else f"{role}: no run"
    return ""


def variant_row(variant: str, base: list[Side], head: list[Side], thresholds: dict[str, float],
                correctness: tuple[str, str], noises: dict[str, Noise] | None = None,
                quantile: float = LEVEL) -> dict:
    """One row of the comparison's table (the keys report.py and the PR page read). NOISES: the
    series' noise per metric where known (pooled into the intervals); QUANTILE: the intervals'.
    `decided`: False while another start a side could settle the row (row_decided)."""
    noises = noises or {}
    changes = [c for m, t in thresholds.items()
               if (c := metric_change(m, base, head, t, noises.get(m), quantile)) is not None]
    headline = next((c for c in changes if c["metric"] == HEADLINE), None)
    row = {"variant": variant, "metric": HEADLINE, "unit": contract.METRICS[HEADLINE].unit,
           "base": headline and headline["base"], "head": headline and headline["head"],
           "effect": headline and headline["effect"], "ci_low": headline and headline["ci_low"],
           "ci_high": headline and headline["ci_high"], "threshold": thresholds.get(HEADLINE),
           "correctness": correctness[0], "correctness_reason": correctness[1],
           "share_base": _median([s.share for s in base]), "share_head": _median([s.share for s in head]),
           "took_effect": next((s.took_effect for s in head if s.took_effect), ""),
           "base_runs": [s.run_id for s in base], "head_runs": [s.run_id for s in head],
           "metrics": changes, "note": "", "starts": {"base": len(base), "head": len(head)},
           "level": 2 * quantile - 1}
    row["outcome"], row["note"] = _row_word(row, base, head, changes, correctness[0])
    row["decided"] = row_decided(row, len({s.host for s in base + head}) > 1)
    return row


def row_decided(row: dict, hosts_differ: bool = False) -> bool:
    """A row more starts cannot change (a wrong output, a failed run, no metric, sides on
    different machines), one with a regression shown between engine starts, or one whose headline
    change is settled and no metric is inconclusive. An improvement or a pass with an interval
    that still straddles the threshold is not settled, nor anything judged on one start a side
    (its repeats leave the noise between starts out)."""
    if hosts_differ or row["outcome"] in (words.INCORRECT, words.FAILED, words.NOT_JUDGED):
        return True
    if any(c["evidence"] != "engine starts" for c in row["metrics"]):
        return False
    if row["outcome"] == words.REGRESSED:
        return True
    headline = next((c for c in row["metrics"] if c["metric"] == HEADLINE), None)
    return (headline is None or headline["decided"]) and all(c["word"] != words.INCONCLUSIVE for c in row["metrics"])


def _row_word(row: dict, base: list[Side], head: list[Side], changes: list[dict], correct: str) -> tuple[str, str]:
    if correct == "incorrect":
        return words.INCORRECT, row["correctness_reason"]
    if failed := _failed(base, head):
        return words.FAILED, failed
    hosts = {s.host for s in base + head}
    if len(hosts) > 1:
        return words.INCONCLUSIVE, f"the sides ran on {len(hosts)} different machines: not comparable"
    if not changes:
        return words.NOT_JUDGED, "no metric measured on both sides"
    if correct not in ("identical", "drift"):  # drift: within the logprob tolerance, correct
        return words.NOT_JUDGED, f"correctness not judged: {row['correctness_reason'] or 'no greedy output'}"
    note = "" if changes[0]["evidence"] == "engine starts" else (
        "one engine start a side: the interval is the repeats' (noise between starts left out)")
    pooled = next((c["noise"] for c in changes if c["metric"] == HEADLINE and c.get("noise")), None)
    if pooled and not note:
        note = (f"intervals pooled with the series' noise between starts "
                f"({short_percent(pooled['relative'])} over {pooled['starts']} starts)")
    return worst(c["word"] for c in changes), note


def below_visible(row: dict, cap: int) -> float | None:
    """The smallest headline change the check finds 19 times in 20 with CAP starts a side, when the
    row's own change is smaller than that and the noise, not the threshold, sets it; else None."""
    headline = next((c for c in row["metrics"] if c["metric"] == HEADLINE), None)
    if headline is None or headline.get("spread") is None or row["outcome"] not in (
            words.PASSED, words.INCONCLUSIVE):
        return None
    visible = detectable(headline["spread"], cap, headline["threshold"])
    return visible if visible > headline["threshold"] and abs(headline["effect"]) < visible else None


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return median(values) if values else None


def comparison_outcome(rows: list[dict]) -> tuple[str, str]:
    """The worst row's word, and one line saying why (its headline change or its note)."""
    if not rows:
        return words.NOT_JUDGED, "no variant was compared"
    word = worst(r["outcome"] for r in rows)
    row = next(r for r in rows if r["outcome"] == word)
    deciding = next((c for c in row["metrics"] if c["word"] == word), None)
    if deciding is not None and word in (words.REGRESSED, words.IMPROVED, words.INCONCLUSIVE, words.PASSED):
        return word, f"{row['variant']}: {change_text(deciding)}"
    return word, f"{row['variant']}: {row['note'] or word.replace('_', ' ')}"


def undecided_text(row: dict) -> str:
    """Why a row asks for another start: 'decode throughput -0.8% [-2.1%, +0.5%] (threshold 0.5%)
    is undecided'."""
    change = next((c for c in row["metrics"] if c["metric"] == HEADLINE and not c["decided"]), None) or \
        next((c for c in row["metrics"] if c["word"] == words.INCONCLUSIVE), None)
    if change is None:
        return "undecided"
    if change["evidence"] != "engine starts":
        return "one engine start a side gives no interval between starts"
    return f"{change_text(change)} is undecided"


def change_text(change: dict) -> str:
    """'decode throughput -36.1% [-40.2%, -31.8%] (threshold 3%)'."""
    info = contract.METRICS.get(change["metric"])
    label = info.label if info else change["metric"]
    text = f"{label} {change['effect'] * 100:+.1f}%"
    if change["ci_low"] is not None:
        text += f" [{change['ci_low'] * 100:+.1f}%, {change['ci_high'] * 100:+.1f}%]"
    return text + f" (threshold {short_percent(change['threshold'])})"
