"""One request to a forge's REST API (GitHub's, GitLab's), and the two ways it can go wrong: try
again later, or refused for good. Below github/ and gitlab/: they call it, it knows neither."""
from __future__ import annotations

import httpx
from django.conf import settings

from benchsite.metrics.instruments import FORGE_REPORTS, http_result

class TransientReportError(Exception):
    """The API could not take it now (network, 5xx, rate limit): a retry may succeed."""


class ReportRefused(Exception):
    """The API refused it (4xx) or the service is set up wrong: retrying will not help."""


class NotFound(ReportRefused):
    """404: e.g. a comment someone deleted."""


class TransientStatusError(Exception):
    """The forge could not take a run's commit status now (network, 5xx, rate limit): try again later."""


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        return str(body.get("message") or body.get("error") or body)[:300]
    return str(body)[:300]


def _rate_limited(response: httpx.Response) -> bool:
    """GitHub answers a rate limit with 403 (or 429) and no requests left, or says so."""
    if response.status_code == 429:
        return True
    return response.status_code == 403 and (response.headers.get("x-ratelimit-remaining") == "0"
                                            or "rate limit" in response.text.lower())


def call(method: str, url: str, *, headers: dict, json: dict | None = None):
    """The JSON answer of METHOD URL (None when empty); raises TransientReportError or
    ReportRefused with the API's message. Tokens are in HEADERS only, never in what is raised."""
    try:
        response = httpx.request(method, url, json=json, headers=headers, timeout=settings.BENCH_STATUS_TIMEOUT_S)
    except httpx.HTTPError as exc:
        FORGE_REPORTS.labels(result="retry").inc()
        raise TransientReportError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
    FORGE_REPORTS.labels(result="retry" if _rate_limited(response) else http_result(response.status_code)).inc()
    if response.status_code >= 500 or _rate_limited(response):
        raise TransientReportError(f"{method} {url}: HTTP {response.status_code} {_message(response)}")
    if response.status_code >= 400:
        kind = NotFound if response.status_code == 404 else ReportRefused
        raise kind(f"{method} {url}: HTTP {response.status_code} {_message(response)}")
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise TransientReportError(f"{method} {url}: HTTP {response.status_code}, not JSON") from None
