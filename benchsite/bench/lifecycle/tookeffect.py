"""How a run's took-effect report reads: what the variant asked for is judged (applied, not
applied, superseded, ...); a default it did not ask for (a fusion the engine turns on by itself)
is information, never a "not applied" against the variant."""
from __future__ import annotations

from collections import Counter

OK, BAD, MUTED = "ok", "bad", "muted"


def _counts(checks: list[dict]) -> str:
    return ", ".join(f"{n} {verdict}" for verdict, n in Counter(c.get("verdict", "") for c in checks).items())


def took_effect_view(report: dict | None) -> dict | None:
    """{'asked', 'defaults', 'summary', 'tone', 'flagged', 'flagged_settings'}; None without checks.
    `tone`: ok when every setting asked for applied, bad when one had no effect, else muted."""
    checks = (report or {}).get("checks") or []
    if not checks:
        return None
    asked = [c for c in checks if c.get("source") != "default"]
    defaults = [c for c in checks if c.get("source") == "default"]
    flagged = [c["setting"] for c in asked if c.get("flag")]
    parts = [_counts(asked) if asked else "nothing asked"]
    if defaults:
        parts.append(f"{len(defaults)} default{'s' if len(defaults) > 1 else ''} not asked for (information)")
    tone = BAD if flagged else OK if asked and all(c.get("verdict") == "applied" for c in asked) else MUTED
    return {"asked": asked, "defaults": defaults, "summary": "; ".join(parts), "tone": tone,
            "flagged": bool(flagged), "flagged_settings": flagged}
