"""Which of a measurement's samples are clean: a repeat the probe flagged (held back, burst) is
never shown or used as a sample. Pages, verdicts and pull-request checks all split them here."""
from __future__ import annotations

from runners.contract import aligned_flags

from ..models import Measurement


def split_samples(m: Measurement) -> tuple[list, dict]:
    """(clean samples, {flag: count}); flags that do not line up with the samples flag nothing."""
    flags = aligned_flags(m.samples, m.sample_flags) or [""] * len(m.samples or [])
    flagged: dict[str, int] = {}
    for flag in flags:
        if flag:
            flagged[flag] = flagged.get(flag, 0) + 1
    return [s for s, flag in zip(m.samples or [], flags) if not flag], flagged
