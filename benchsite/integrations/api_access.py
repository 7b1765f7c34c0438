"""Who may ask the JSON API what, in Django REST framework's terms: the bearer token
(tokens.py), the roles (bench/domain/permissions.py) and the rate limit (ratelimit.py).

- Reading (GET) is open, unless BENCH_PRIVATE_DASHBOARD: then a session or a token.
- Triggering (POST /api/runs/) takes a member's token.
- Every request counts against its token's (any Authorization header's) or its address's
  BENCH_API_REQUESTS_PER_MIN, before the token is looked at."""
from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions as drf_permissions, throttling

from benchsite.bench.domain import permissions
from benchsite.rest.answers import RateLimited
from benchsite.rest.views import JsonApiView

from . import ratelimit, tokens

REALM = 'Bearer realm="decode-bench"'


class BearerToken(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>`: the token's user, or none when no bearer token is sent;
    a token that is unknown, revoked or of an inactive user is refused (401)."""

    def authenticate(self, request):
        authorization = request.headers.get("Authorization", "")
        if not tokens.bearer(authorization):
            return None
        try:
            token = tokens.api_token_authenticate(authorization=authorization)
        except tokens.ApiAuthError as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request):
        return REALM


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerToken
    name = "bearer"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "an API token (`manage.py api_token_create USER NAME`, or the admin)"}

    def get_security_requirement(self, auto_schema):
        if auto_schema.method in drf_permissions.SAFE_METHODS:  # reading: a token, or none on a public dashboard
            return [{self.name: []}, {}]
        return {self.name: []}


class MayRead(drf_permissions.BasePermission):
    """Anyone on a public dashboard; on a private one, a logged-in session or a valid token."""

    def has_permission(self, request, view):
        if not settings.BENCH_PRIVATE_DASHBOARD:
            return True  # the token is not even read
        return request._request.user.is_authenticated or request.user.is_authenticated


class MayTrigger(drf_permissions.BasePermission):
    """A member's token (a session does not do: no CSRF exposure)."""

    def has_permission(self, request, view):
        user = request.user
        if user.is_authenticated and not permissions.is_member(user):
            self.message = f"user {user.get_username()!r} is a viewer: only members trigger runs"
            return False
        return user.is_authenticated


class ApiRateLimit(throttling.BaseThrottle):
    """BENCH_API_REQUESTS_PER_MIN a minute for each token (as sent, valid or not), else each address."""

    def allow_request(self, request, view):
        authorization = request.headers.get("Authorization", "")
        ident = f"token:{authorization}" if authorization else f"address:{request.META.get('REMOTE_ADDR', '')}"
        return not ratelimit.over("api", ident, limit=settings.BENCH_API_REQUESTS_PER_MIN)

    def wait(self):
        return ratelimit.retry_after_s()


class ApiView(JsonApiView):
    """A view of the runs, commits and pull requests API: rate-limited, read by MayRead; a
    method's own permission in `method_permissions`."""
    authentication_classes = [BearerToken]
    throttle_classes = [ApiRateLimit]
    permission_classes = [MayRead]
    method_permissions: dict = {}

    def get_permissions(self):
        chosen = self.method_permissions.get(self.request.method, self.permission_classes)
        return [permission() for permission in chosen]

    def permission_denied(self, request, message=None, code=None):
        if request.auth is None:  # no token, or no bearer one (a bad one was refused as it was read)
            raise exceptions.NotAuthenticated(tokens.SEND_TOKEN)
        raise exceptions.PermissionDenied(message)

    def throttled(self, request, wait):
        kind = "token" if request.headers.get("Authorization") else "address"
        raise RateLimited(f"more than {settings.BENCH_API_REQUESTS_PER_MIN} requests a minute for this {kind}", wait)
