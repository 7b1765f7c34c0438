"""The comparison of a PR as Markdown: what a check run's summary, a PR comment and a
merge-request note show."""
from __future__ import annotations

from django.conf import settings

from benchsite.bench.domain.units import change_text, interval_text, number, percent
from benchsite.regressions.detect.sensitivity import short_percent
from benchsite.regressions.detect.sequential import ALPHA

from .display import LEGACY_LEVEL, below_text, level_text
from .selectors import pull_page_path
from .wording import accepted_text, starts_text

DASH = "—"
COLUMNS = ("variant", "base", "head", "change [interval]", "correctness", "allreduce share base → head",
           "took effect")
STATE_WORDS = {"waiting": "waiting for a maintainer", "queued": "queued", "running": "running",
               "cancelled": "cancelled"}


def pr_page_url(pull) -> str:
    """The service's page of the PR, absolute (/pr/github.com/o/r/12/ under BENCH_PUBLIC_URL)."""
    return settings.BENCH_PUBLIC_URL + pull_page_path(pull)


def _cell(text) -> str:
    """One table cell: a pipe or a line break would break the row."""
    text = " ".join(str(text).split())
    return text.replace("|", "\\|") or DASH


def _value(value, unit: str) -> str:
    return DASH if value is None else f"{number(value)} {unit}".strip()


def _change(row: dict) -> str:
    if row.get("effect") is None:
        return DASH
    if row.get("ci_low") is None or row.get("ci_high") is None:
        return change_text(row["effect"])
    return f"{change_text(row['effect'])} {interval_text(row['ci_low'], row['ci_high'])}"


def _share(row: dict) -> str:
    base, head = row.get("share_base"), row.get("share_head")
    if base is None and head is None:
        return DASH
    return f"{DASH if base is None else percent(base)} → {DASH if head is None else percent(head)}"


def _correctness(row: dict) -> str:
    word = row.get("correctness") or DASH
    reason = row.get("correctness_reason") or ""
    return f"{word}: {reason}" if word == "incorrect" and reason else word


def table_markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        unit = row.get("unit") or ""
        variant = row.get("variant", "?") + (f" ({row['outcome']})" if row.get("outcome") else "")
        cells = [variant, _value(row.get("base"), unit), _value(row.get("head"), unit), _change(row),
                 _correctness(row), _share(row), row.get("took_effect") or DASH]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    notes = [f"- {row.get('variant', '?')}: {_cell(row['note'])}" for row in rows
             if row.get("note") and row["note"] != row.get("correctness_reason")]  # said in its cell already
    notes += [f"- {row.get('variant', '?')}: {below_text(row)}" for row in rows if row.get("visible_at_cap")]
    return "\n".join(lines + ([""] + notes if notes else []))


def _level(rows: list[dict]) -> str:
    level = level_text(rows)
    if level == LEGACY_LEVEL:  # a comparison judged before adaptive starts
        return f"{level} intervals"
    return f"{level} intervals (Pocock's level for each look: {(1 - ALPHA) * 100:g}% over all looks)"


def _threshold(rows: list[dict]) -> str:
    found = sorted({row["threshold"] for row in rows if row.get("threshold")})
    return f"Threshold: a change beyond {', '.join(short_percent(t) for t in found)} counts; " if found else ""


def _section(comparison) -> str:
    heading = f"### {comparison.check_name}: "
    if comparison.state != "done":
        heading += STATE_WORDS.get(comparison.state, comparison.state)
        summary = " ".join(comparison.summary.split()) if comparison.state in ("cancelled", "running") else ""
        return f"{heading}\n\n{summary}" if summary else heading
    parts = [heading + (comparison.outcome or "done").replace("_", " ")]
    if comparison.accepted_by:
        parts.append(f"**{accepted_text(comparison).capitalize()}.**")
    if comparison.summary:
        parts.append(" ".join(comparison.summary.split()))
    if comparison.table:
        parts.append(table_markdown(comparison.table))
        parts.append(f"{_threshold(comparison.table)}{_level(comparison.table)} of head / base − 1; "
                     f"{starts_text(comparison)}; head {comparison.head_sha[:12]}"
                     f", base {(comparison.merge_base or comparison.base_branch)[:12]}.")
    return "\n\n".join(parts)


def comparison_markdown(comparisons) -> str:
    """A section per comparison (one per benchmark): its outcome and why, the table of its
    variants, and a link to the PR's page."""
    comparisons = list(comparisons)
    sections = [_section(c) for c in comparisons]
    if comparisons:
        sections.append(f"[Runs and details]({pr_page_url(comparisons[0].pull)})")
    return "\n\n".join(sections)
