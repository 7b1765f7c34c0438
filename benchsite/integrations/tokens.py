"""API tokens of the JSON API: created (shown once), checked on each request, revoked."""
import hashlib
import secrets

from django.utils import timezone

from .models import ApiToken

TOKEN_PREFIX = "dbt_"
SEND_TOKEN = "send `Authorization: Bearer <token>`"


class ApiAuthError(Exception):
    """No valid bearer token (the message says why)."""


def _token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token; the returned text is the only time it exists outside its holder's hands."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, token_sha256=_token_hash(raw), prefix=raw[:10])
    return token, raw


def bearer(authorization: str) -> str:
    """The token an `Authorization: Bearer <token>` header sends; "" when it sends none."""
    scheme, _, raw = (authorization or "").partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else ""


def api_token_authenticate(*, authorization: str) -> ApiToken:
    raw = bearer(authorization)
    if not raw:
        raise ApiAuthError(SEND_TOKEN)
    token = ApiToken.objects.select_related("user").filter(token_sha256=_token_hash(raw)).first()
    if token is None or token.revoked or not token.user.is_active:
        raise ApiAuthError("invalid or revoked token")
    ApiToken.objects.filter(id=token.id).update(last_used_at=timezone.now())
    return token


def api_tokens_revoke(*, tokens) -> int:
    return tokens.filter(revoked=False).update(revoked=True)
