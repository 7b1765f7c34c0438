"""What the service reports back to a forge (GitHub or GitLab): commit statuses, pull-request checks
and notes, and how those calls retry."""
from .fields import Group, env
from .retry import RetryPolicy


class Statuses(Group):
    title = "Commit statuses and pull-request reports"
    about = ("Both forges' reports retry on a transient error (a timeout, HTTP 5xx, a rate limit) by one policy: "
             "the base, then twice as long before each further retry (30 s, 60 s, 120 s...).")

    context: str = env("BENCH_STATUS_CONTEXT", "decode-bench", "the prefix of the status context")
    max_retries: int = env("BENCH_STATUS_MAX_RETRIES", 5, "the retry policy's retries after the first attempt", ge=0)
    retry_base_ms: int = env("BENCH_STATUS_RETRY_BASE_MS", 30_000, "the retry policy's first wait (ms)", ge=1)
    timeout_s: int = env("BENCH_STATUS_TIMEOUT_S", 10, "one request to the forge's API", ge=1)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=self.max_retries, base_s=self.retry_base_ms / 1000)
