"""Fixed-window request counters in Django's cache (set CACHES to Redis when several web
processes serve the site, or each counts on its own).

    if ratelimit.over("api", key, limit=120): answer 429 with Retry-After: ratelimit.WINDOW_S
"""
import hashlib
import time

from django.core.cache import cache

WINDOW_S = 60


def _key(scope: str, ident: str) -> str:
    digest = hashlib.sha256(ident.encode()).hexdigest()[:32]  # never a token in a cache key
    return f"ratelimit:{scope}:{digest}:{int(time.time() // WINDOW_S)}"


def hit(scope: str, ident: str) -> int:
    """Count one request of IDENT in this window; return the count so far."""
    key = _key(scope, ident)
    if cache.add(key, 1, timeout=WINDOW_S * 2):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=WINDOW_S * 2)
        return 1


def count(scope: str, ident: str) -> int:
    return cache.get(_key(scope, ident), 0)


def over(scope: str, ident: str, *, limit: int) -> bool:
    """Count this request and say whether IDENT went over LIMIT requests in this window."""
    return hit(scope, ident) > limit


def retry_after_s() -> int:
    return WINDOW_S - int(time.time() % WINDOW_S) or 1
