"""GitHub App authentication: the App's JWT, the installation on a repository, and the
installation's access token (kept in process memory until shortly before it expires)."""
from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings

from benchsite.config.github import read_app_private_key

from ..forge_api import ReportRefused, call
from .rest import GITHUB_HEADERS

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

TOKEN_MARGIN_S = 60  # a token this close to its expiry is not used
_lock = threading.Lock()
_installations: dict[tuple, int] = {}           # (api, app id, owner, name) -> installation id
_tokens: dict[tuple, tuple[str, float]] = {}     # (api, app id, installation id) -> (token, expires at)


class GitHubAppError(ReportRefused):
    """The App is set up wrong (its key), or GitHub refused it."""


def app_configured() -> bool:
    return bool(settings.BENCH_GITHUB_APP_ID and settings.BENCH_GITHUB_APP_PRIVATE_KEY)


def app_private_key() -> rsa.RSAPrivateKey:
    """The App's RSA private key from BENCH_GITHUB_APP_PRIVATE_KEY (PEM text, or @path to a
    .pem file; checked at start too); GitHubAppError saying what is wrong, never the key itself."""
    try:
        return read_app_private_key(settings.BENCH_GITHUB_APP_PRIVATE_KEY)
    except ValueError as exc:
        raise GitHubAppError(f"BENCH_GITHUB_APP_PRIVATE_KEY: {exc}") from None


def app_jwt(now: float | None = None) -> str:
    """The App's own token (RS256), good for 9 minutes; issued a minute back for clock skew."""
    import jwt  # with cryptography, 70 ms: only where an App signs (every process imports this module)

    now = int(time.time() if now is None else now)
    payload = {"iat": now - 60, "exp": now + 9 * 60, "iss": str(settings.BENCH_GITHUB_APP_ID)}
    return jwt.encode(payload, app_private_key(), algorithm="RS256")


def _as_app() -> dict:
    return {**GITHUB_HEADERS, "Authorization": f"Bearer {app_jwt()}"}


def installation_id(owner: str, name: str) -> int:
    """The App's installation on OWNER/NAME; GitHubAppError when the App is not installed there."""
    key = (settings.BENCH_GITHUB_API_URL, settings.BENCH_GITHUB_APP_ID, owner, name)
    with _lock:
        if key in _installations:
            return _installations[key]
    url = f"{settings.BENCH_GITHUB_API_URL}/repos/{owner}/{name}/installation"
    try:
        found = call("GET", url, headers=_as_app())
    except ReportRefused as exc:
        raise GitHubAppError(f"the GitHub App is not installed on {owner}/{name}? {exc}") from None
    with _lock:
        _installations[key] = int(found["id"])
    return _installations[key]


def _expiry(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def installation_token(owner: str, name: str) -> str:
    """An access token of the App's installation on OWNER/NAME, reused until TOKEN_MARGIN_S
    before it expires."""
    installation = installation_id(owner, name)
    key = (settings.BENCH_GITHUB_API_URL, settings.BENCH_GITHUB_APP_ID, installation)
    with _lock:
        token, expires = _tokens.get(key, ("", 0.0))
    if token and time.time() < expires - TOKEN_MARGIN_S:
        return token
    url = f"{settings.BENCH_GITHUB_API_URL}/app/installations/{installation}/access_tokens"
    try:
        answer = call("POST", url, headers=_as_app())
    except ReportRefused as exc:
        with _lock:  # uninstalled and installed again: look the installation up afresh
            _installations.pop((*key[:2], owner, name), None)
        raise GitHubAppError(f"no installation token for {owner}/{name}: {exc}") from None
    with _lock:
        _tokens[key] = (answer["token"], _expiry(answer["expires_at"]))
    return answer["token"]


def installation_headers(owner: str, name: str) -> dict:
    return {**GITHUB_HEADERS, "Authorization": f"token {installation_token(owner, name)}"}


def forget_tokens() -> None:
    """Drop what is kept in memory (tests; a rotated key)."""
    with _lock:
        _installations.clear()
        _tokens.clear()
