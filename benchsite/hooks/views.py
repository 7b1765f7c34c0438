"""Thin views: the webhook endpoints and the JSON runs API."""
from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from benchsite.bench import permissions
from benchsite.bench import services as bench_services
from benchsite.bench.models import Run

from . import api, openapi, ratelimit, selectors, services
from .providers import PROVIDERS


def _read_bounded(request) -> bytes | None:
    """The raw body, or None when it is over the limit. Read from the stream: Django's own
    request.body would stop at DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) with a 400."""
    body = request.read(services.MAX_BODY_BYTES + 1)
    return None if len(body) > services.MAX_BODY_BYTES else body


def _content_length(request) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


def _too_many(detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=429)
    response["Retry-After"] = str(ratelimit.retry_after_s())
    return response


@csrf_exempt
@require_POST
def webhook(request, provider):
    provider = PROVIDERS[provider]
    address = request.META.get("REMOTE_ADDR", "")
    # Only deliveries that fail verification count against their address: a valid signed one is
    # never limited (GitHub does not retry a 429). Past the limit, refusals are not stored either.
    limited = ratelimit.count("webhook-refused", address) >= settings.BENCH_WEBHOOK_REFUSED_PER_MIN
    size = _content_length(request)
    body = None if size is not None and size > services.MAX_BODY_BYTES else _read_bounded(request)
    if body is None:
        answer = services.webhook_refuse_oversize(provider=provider, headers=request.headers, size=size)
    else:
        answer = services.webhook_receive(provider=provider, headers=request.headers, body=body,
                                          content_type=request.content_type or "", store_refused=not limited)
    if answer.status in services.UNVERIFIED_STATUSES:
        ratelimit.hit("webhook-refused", address)
        if limited:
            return _too_many(f"too many unverified deliveries from {address}: {answer.detail}")
    return JsonResponse(answer.as_json(), status=answer.status)


def _base_url(request) -> str:
    return f"{request.scheme}://{request.get_host()}"


@csrf_exempt  # bearer tokens, not cookies: no CSRF exposure
@require_http_methods(["GET", "POST"])
def runs(request):
    authorization = request.headers.get("Authorization", "")
    ident = f"token:{authorization}" if authorization else f"address:{request.META.get('REMOTE_ADDR', '')}"
    if ratelimit.over("api", ident, limit=settings.BENCH_API_REQUESTS_PER_MIN):
        return _too_many(f"more than {settings.BENCH_API_REQUESTS_PER_MIN} requests a minute for this "
                         f"{'token' if authorization else 'address'}")
    try:
        if request.method == "GET" and settings.BENCH_PRIVATE_DASHBOARD and not request.user.is_authenticated:
            _authenticated(request)  # a private dashboard: reading runs takes a token too
        if request.method == "GET":
            found = selectors.runs_filter(filters=api.run_filters_parse(request.GET))
            return JsonResponse({"runs": [selectors.run_json(r, base_url=_base_url(request)) for r in found]})
        return _trigger(request)
    except api.BadRequest as exc:
        response = JsonResponse({"error": str(exc)}, status=exc.status)
        if exc.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="decode-bench"'
        return response


def _authenticated(request):
    try:
        return services.api_token_authenticate(authorization=request.headers.get("Authorization", ""))
    except services.ApiAuthError as exc:
        raise api.BadRequest(str(exc), status=401) from None


def _trigger(request):
    token = _authenticated(request)
    if not permissions.is_member(token.user):
        raise api.BadRequest(f"user {token.user.get_username()!r} is a viewer: only members trigger runs", status=403)
    req = api.trigger_request_parse(request.body)
    try:
        created = bench_services.runs_trigger(benchmark=req.benchmark, trigger=Run.Trigger.API, user=token.user,
                                              variants=req.variants, commit=req.commit, ref=req.ref,
                                              repeats=req.repeats)
    except bench_services.TriggerError as exc:
        raise api.BadRequest(str(exc)) from None
    return JsonResponse({"runs": [selectors.run_json(r, base_url=_base_url(request)) for r in created]}, status=201)


@require_http_methods(["GET"])
def openapi_document(request):
    return JsonResponse(openapi.openapi_document())
