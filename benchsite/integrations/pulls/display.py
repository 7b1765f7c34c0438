"""A comparison's table as the PR page reads it: every number with its unit (pure)."""
from __future__ import annotations

from benchsite.bench.domain import units
from benchsite.regressions.detect.sensitivity import short_percent
from runners.contract import METRICS


def value_text(metric: str, unit: str, value) -> str:
    """'41.2 tok/s': the registry's format for a known metric, else the row's own unit."""
    if value is None:
        return "–"
    if metric in METRICS:
        return units.metric_text(metric, value)
    return f"{units.number(value)} {unit}".strip()


def effect_text(effect, low, high) -> str:
    """head/base - 1 and its interval: '−0.7% [−2.0%, +0.6%]'."""
    if effect is None:
        return "–"
    text = units.change_text(effect)
    return f"{text} {units.interval_text(low, high)}" if low is not None and high is not None else text


def share_text(base, head) -> str:
    """The allreduce share of a decode step, base to head: '42.0% → 40.0%'."""
    if base is None and head is None:
        return "–"
    return f"{units.percent(base)} → {units.percent(head)}"


def _number(row: dict, key: str):
    value = row.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _change_rows(row: dict) -> list[dict]:
    """The row's judged metrics besides its headline (ITL, TTFT, ...), each with its word."""
    changes = row.get("metrics") if isinstance(row.get("metrics"), list) else []
    return [{"metric": str(c.get("metric") or ""), "label": units.metric_label(str(c.get("metric") or "")),
             "word": str(c.get("word") or ""),
             "base": value_text(str(c.get("metric") or ""), str(c.get("unit") or ""), _number(c, "base")),
             "head": value_text(str(c.get("metric") or ""), str(c.get("unit") or ""), _number(c, "head")),
             "effect": effect_text(_number(c, "effect"), _number(c, "ci_low"), _number(c, "ci_high")),
             "threshold": _threshold_text(_number(c, "threshold"))}
            for c in changes if isinstance(c, dict) and c.get("metric") != row.get("metric")]


def _threshold_text(threshold) -> str:
    return "–" if threshold is None else f"±{units.percent(threshold)}"


def table_rows(table) -> list[dict]:
    """Each row of `comparison.table` with its texts; rows that are not mappings are skipped
    (the table is JSON written by another module: the page must not fail on it)."""
    rows = []
    for row in table if isinstance(table, list) else []:
        if not isinstance(row, dict):
            continue
        metric, unit = str(row.get("metric") or ""), str(row.get("unit") or "")
        rows.append({
            "variant": str(row.get("variant") or ""), "outcome": str(row.get("outcome") or ""),
            "metric": metric, "label": units.metric_label(metric) if metric else "",
            "base": value_text(metric, unit, _number(row, "base")),
            "head": value_text(metric, unit, _number(row, "head")),
            "effect": effect_text(_number(row, "effect"), _number(row, "ci_low"), _number(row, "ci_high")),
            "threshold": _threshold_text(_number(row, "threshold")), "others": _change_rows(row),
            "correctness": str(row.get("correctness") or "not judged"),
            "correctness_reason": str(row.get("correctness_reason") or ""),
            "share": share_text(_number(row, "share_base"), _number(row, "share_head")),
            "took_effect": str(row.get("took_effect") or ""),
            "note": "; ".join(filter(None, [str(row.get("note") or ""),
                                            below_text(row) if _number(row, "visible_at_cap") else ""])),
        })
    return rows


def below_text(row: dict) -> str:
    """'a change of -0.4% is below what this check can see: 4.1% (found 19 times in 20 with 6 starts a side)'."""
    starts = max((row.get("starts") or {}).values(), default=0)
    return (f"a change of {units.change_text(row['effect'])} is below what this check can see: "
            f"{short_percent(row['visible_at_cap'])} (found 19 times in 20 with {starts} starts a side)")


LEGACY_LEVEL = "95%"


def level_text(table) -> str:
    """The intervals' level as a column head says it: Pocock's per-look '99.7%' (a table from
    before the level was kept: LEGACY_LEVEL)."""
    levels = sorted({round(row["level"] * 100, 1) for row in table if isinstance(row, dict)
                     and isinstance(row.get("level"), (int, float))})
    return "/".join(f"{x:g}%" for x in levels) or LEGACY_LEVEL
