"""Alerts of confirmed regressions: webhooks (signed), Slack and email, and how they retry."""
from .fields import Group, env
from .retry import RetryPolicy


class Alerts(Group):
    title = "Alerts"
    about = ("A webhook or email that fails for a transient reason is retried by one policy: the base, then twice "
             "as long before each further retry.")

    secret: str = env("BENCH_ALERT_SECRET", "", "the HMAC-SHA256 key of the outgoing webhook "
                      "(`X-Bench-Signature: sha256=HEX`) when a subscription has none of its own", repr=False)
    from_email: str = env("BENCH_ALERT_FROM_EMAIL", "", "the sender of alert emails",
                          shown="Django's `DEFAULT_FROM_EMAIL`")
    max_retries: int = env("BENCH_ALERT_MAX_RETRIES", 5, "the retry policy's retries after the first attempt", ge=0)
    retry_base_ms: int = env("BENCH_ALERT_RETRY_BASE_MS", 30_000, "the retry policy's first wait (ms)", ge=1)
    timeout_s: int = env("BENCH_ALERT_TIMEOUT_S", 10, "one webhook request", ge=1)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=self.max_retries, base_s=self.retry_base_ms / 1000)
