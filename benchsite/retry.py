"""Retry with exponential backoff for the web-queue tasks that talk to the outside world
(commit statuses, alert webhooks): one rule, so both give up and log the same way."""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger(__name__)


def retry_or_give_up(task, exc: Exception, *, what: str, max_retries: int, base_ms: float,
                     give_up: Callable[[], None] = lambda: None) -> bool:
    """From a bound task's `except`: raise the task's Retry after BASE_MS x 2**attempt (base,
    2 x base, 4 x base...), or, past MAX_RETRIES, log, call GIVE_UP and return False."""
    attempt = task.request.retries
    if attempt >= max_retries:
        log.error("%s: gave up after %d attempts: %s", what, attempt + 1, exc)
        give_up()
        return False
    countdown = base_ms / 1000 * 2**attempt
    log.warning("%s: %s; retry %d in %.1f s", what, exc, attempt + 1, countdown)
    raise task.retry(countdown=countdown) from None
