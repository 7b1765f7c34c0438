"""A retry policy: how a task retries a call to the outside world (an integration) or to the
database, one small model for all of them (benchsite/retry.py applies it)."""
from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    """RETRIES more attempts after the first; the first wait BASE_S, each next one twice as long,
    at most CAP_S (None: no cap)."""
    model_config = ConfigDict(frozen=True)

    retries: int = Field(ge=0)
    base_s: float = Field(gt=0)
    cap_s: float | None = Field(default=None, gt=0)

    def delay_s(self, retry: int) -> float:
        """The wait before retry number RETRY (0 for the first)."""
        wait = self.base_s * 2**retry
        return wait if self.cap_s is None else min(wait, self.cap_s)

    def describe(self) -> str:
        cap = f", at most {self.cap_s:g} s" if self.cap_s is not None else ""
        return f"{self.retries} retries, {self.base_s:g} s then doubling{cap}"
