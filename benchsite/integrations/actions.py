"""What a webhook delivery asks for, and the answer it gets: plain values shared by the forges'
readers (github/, gitlab/, forge_payloads.py, pulls/events.py) and the handlers (webhooks.py,
pulls/)."""
from dataclasses import dataclass, field


class Refused(Exception):
    """The delivery is refused with this HTTP status; the message says why."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass(frozen=True)
class Ping:
    pass


@dataclass(frozen=True)
class Ignored:
    reason: str


@dataclass(frozen=True)
class BranchPush:
    branch: str
    commit: str


@dataclass
class Answer:
    status: int
    detail: str
    runs: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)

    def as_json(self) -> dict:
        data = {"detail": self.detail}
        if self.runs or self.cancelled:
            data.update(runs=self.runs, cancelled=self.cancelled)
        return data
