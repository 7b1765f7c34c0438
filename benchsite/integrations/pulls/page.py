"""What the PR page shows, put together from a PullSummary (no queries of its own)."""
from __future__ import annotations

from benchsite.bench.lifecycle import outcome

from . import display
from .models import Comparison
from .selectors import PullSummary, comparison_word, run_pairs
from .wording import accepted_text, starts_text


def _comparison_view(c: Comparison, summary: PullSummary) -> dict:
    runs = summary.runs[c.id]
    return {"comparison": c, "word": comparison_word(c), "final": c.state == Comparison.State.DONE,
            "rows": display.table_rows(c.table), "runs": runs, "pairs": run_pairs(runs),
            "starts": starts_text(c), "level": display.level_text(c.table), "accepted": accepted_text(c)}


def _pushes(earlier: list[Comparison]) -> list[dict]:
    """The earlier comparisons by head, newest first; each head's outcome is the worst of its
    newest comparison per benchmark."""
    heads: dict[str, list[Comparison]] = {}
    for c in earlier:  # newest first
        heads.setdefault(c.head_sha, []).append(c)
    pushes = []
    for sha, comparisons in heads.items():
        newest = {}
        for c in comparisons:
            newest.setdefault(c.benchmark_id, c)
        word, _final = outcome.commit_outcome([(comparison_word(c), True) for c in newest.values()])
        pushes.append({"head_sha": sha, "word": word,
                       "comparisons": [{"comparison": c, "word": comparison_word(c)} for c in comparisons]})
    return pushes


def pull_page_context(summary: PullSummary) -> dict:
    return {"pull": summary.pull, "outcome": summary.outcome, "outcome_final": summary.outcome_final,
            "comparisons": [_comparison_view(c, summary) for c in summary.latest], "missing": summary.missing,
            "pushes": _pushes(summary.earlier), "actions": summary.actions}
