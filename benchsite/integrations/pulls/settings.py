"""A watch's pull-request settings (its `pull_requests:` in YAML): pure, with their defaults."""
from __future__ import annotations

from dataclasses import dataclass

MAX_STARTS_PER_SIDE = 10
CAP_STARTS_PER_SIDE = 20      # the most starts a side a check may add up to (max_starts_per_side)
DEFAULT_CAP = 6               # max_starts_per_side when neither the watch nor the benchmark sets it
_LABEL_CHARS = 100


@dataclass(frozen=True)
class PullSettings:
    drafts: bool = False            # draft PRs run too
    label: str | None = None        # only PRs with this label run; adding it starts one
    starts_per_side: int = 2        # engine starts of each side, interleaved base, head, base, head
    comment: bool = False           # also keep one PR comment with the table (GitHub App)
    max_starts_per_side: int | None = None  # starts a side a check may add up to; None: max(6, starts_per_side)

    def cap(self, benchmark_cap: int | None = None) -> int:
        """The starts a side a check of a benchmark may reach: the benchmark's own cap, else the
        watch's, else max(DEFAULT_CAP, starts_per_side); ValueError when it is below
        starts_per_side."""
        cap = benchmark_cap or self.max_starts_per_side or max(DEFAULT_CAP, self.starts_per_side)
        if cap < self.starts_per_side:
            whose = "the benchmark's " if benchmark_cap else "pull_requests."
            raise ValueError(f"{whose}max_starts_per_side {cap} is below pull_requests.starts_per_side "
                             f"{self.starts_per_side}: a check cannot start with more starts than it may reach")
        return cap


def pull_settings(value) -> PullSettings | None:
    """VALUE as stored on a watch ({} or None: the defaults; False: PR checks off) -> settings;
    ValueError with the reason for anything else."""
    if value is False:
        return None
    if value in (None, True):
        value = {}
    if not isinstance(value, dict):
        raise ValueError("pull_requests must be a mapping (or false to turn PR checks off)")
    unknown = sorted(set(value) - {"drafts", "label", "starts_per_side", "max_starts_per_side", "comment"})
    if unknown:
        raise ValueError(f"pull_requests: unknown keys {unknown}; use drafts, label, starts_per_side, max_starts_per_side, "
                         "comment")
    for key in ("drafts", "comment"):
        if not isinstance(value.get(key, False), bool):
            raise ValueError(f"pull_requests.{key} must be true or false")
    label = value.get("label")
    if label is not None and (not isinstance(label, str) or not 0 < len(label.strip()) <= _LABEL_CHARS):
        raise ValueError(f"pull_requests.label must be a label name of 1 to {_LABEL_CHARS} characters, or null")
    starts = value.get("starts_per_side", 2)
    if isinstance(starts, bool) or not isinstance(starts, int) or not 1 <= starts <= MAX_STARTS_PER_SIDE:
        raise ValueError(f"pull_requests.starts_per_side must be a whole number from 1 to {MAX_STARTS_PER_SIDE}")
    cap = value.get("max_starts_per_side")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= CAP_STARTS_PER_SIDE):
        raise ValueError(f"pull_requests.max_starts_per_side must be a whole number from 1 to {CAP_STARTS_PER_SIDE}")
    settings = PullSettings(drafts=value.get("drafts", False), label=label.strip() if label else None,
                            starts_per_side=starts, comment=value.get("comment", False), max_starts_per_side=cap)
    settings.cap()
    return settings
