"""Retry with exponential backoff for the web-queue tasks that talk to the outside world
(commit statuses, alert webhooks): one rule, so both give up and log the same way; each
integration's RetryPolicy (benchsite/config/retry.py) says how long and how often."""
from __future__ import annotations

import logging
from typing import Callable

from .config.retry import RetryPolicy

log = logging.getLogger(__name__)


def retry_or_give_up(task, exc: Exception, *, what: str, policy: RetryPolicy,
                     give_up: Callable[[], None] = lambda: None) -> bool:
    """From a bound task's `except`: raise the task's Retry after POLICY's wait (base, 2 x base,
    4 x base...), or, past its retries, log, call GIVE_UP and return False."""
    attempt = task.request.retries
    if attempt >= policy.retries:
        log.error("%s: gave up after %d attempts: %s", what, attempt + 1, exc)
        give_up()
        return False
    countdown = policy.delay_s(attempt)
    log.warning("%s: %s; retry %d in %.1f s", what, exc, attempt + 1, countdown)
    raise task.retry(countdown=countdown) from None
