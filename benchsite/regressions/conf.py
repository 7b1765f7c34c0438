"""This app's settings, read from the environment with defaults (no edit of settings.py needed)."""
from django.conf import settings

from benchsite.env import env_bool, env_int, env_str


def _get(name, default):
    return getattr(settings, name, default)


def min_history() -> int:
    """Baseline runs needed before a verdict says more than 'not enough data'."""
    return _get("BENCH_VERDICT_MIN_HISTORY", env_int("BENCH_VERDICT_MIN_HISTORY", 3, minimum=2))


def max_history() -> int:
    return _get("BENCH_VERDICT_MAX_HISTORY", env_int("BENCH_VERDICT_MAX_HISTORY", 20, minimum=2))


def alert_secret() -> str:
    """HMAC-SHA256 key of the outgoing alert webhook (X-Bench-Signature: sha256=HEX)."""
    return _get("BENCH_ALERT_SECRET", env_str("BENCH_ALERT_SECRET", ""))


def alert_max_retries() -> int:
    return _get("BENCH_ALERT_MAX_RETRIES", env_int("BENCH_ALERT_MAX_RETRIES", 5))


def alert_retry_base_ms() -> int:
    return _get("BENCH_ALERT_RETRY_BASE_MS", env_int("BENCH_ALERT_RETRY_BASE_MS", 30_000, minimum=1))


def alert_timeout_s() -> int:
    return _get("BENCH_ALERT_TIMEOUT_S", env_int("BENCH_ALERT_TIMEOUT_S", 10, minimum=1))


def alert_from_email() -> str:
    return _get("BENCH_ALERT_FROM_EMAIL", env_str("BENCH_ALERT_FROM_EMAIL", settings.DEFAULT_FROM_EMAIL))


def confirm_regressions() -> bool:
    """Re-run a regression's commit once and alert only when the re-run agrees."""
    return _get("BENCH_CONFIRM_REGRESSIONS", env_bool("BENCH_CONFIRM_REGRESSIONS", True))


def confirm_host_seen_h() -> int:
    """A host of the pool counts as a place for a confirmation re-run when it finished a run within
    this many hours."""
    return _get("BENCH_CONFIRM_HOST_SEEN_H", env_int("BENCH_CONFIRM_HOST_SEEN_H", 24, minimum=1))


def comm_health_drift() -> float:
    """A host whose allreduce latency moved more than this (0.25 = 25%) from the median of its
    own earlier checks is flagged."""
    return _get("BENCH_COMM_HEALTH_DRIFT", _env_fraction("BENCH_COMM_HEALTH_DRIFT", 0.25))


def comm_health_history() -> int:
    """Earlier checks of the host the drift is measured against (the newest this many; 3 needed)."""
    return _get("BENCH_COMM_HEALTH_HISTORY", env_int("BENCH_COMM_HEALTH_HISTORY", 10, minimum=3))


def _env_fraction(name: str, default: float) -> float:
    import os

    from django.core.exceptions import ImproperlyConfigured

    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number (0.25 = 25%)") from None
    if not value > 0:
        raise ImproperlyConfigured(f"{name}={raw!r} must be above 0")
    return value
