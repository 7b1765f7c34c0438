"""Thin views: the webhook endpoints and the JSON runs API."""
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from benchsite.bench import services as bench_services
from benchsite.bench.models import Run

from . import api, selectors, services
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


@csrf_exempt
@require_POST
def webhook(request, provider):
    provider = PROVIDERS[provider]
    size = _content_length(request)
    body = None if size is not None and size > services.MAX_BODY_BYTES else _read_bounded(request)
    if body is None:
        answer = services.webhook_refuse_oversize(provider=provider, headers=request.headers, size=size)
    else:
        answer = services.webhook_receive(provider=provider, headers=request.headers, body=body,
                                          content_type=request.content_type or "")
    return JsonResponse(answer.as_json(), status=answer.status)


def _base_url(request) -> str:
    return f"{request.scheme}://{request.get_host()}"


@csrf_exempt  # bearer tokens, not cookies: no CSRF exposure
@require_http_methods(["GET", "POST"])
def runs(request):
    try:
        if request.method == "GET":
            found = selectors.runs_filter(filters=api.run_filters_parse(request.GET))
            return JsonResponse({"runs": [selectors.run_json(r, base_url=_base_url(request)) for r in found]})
        return _trigger(request)
    except api.BadRequest as exc:
        return JsonResponse({"error": str(exc)}, status=exc.status)


def _trigger(request):
    try:
        token = services.api_token_authenticate(authorization=request.headers.get("Authorization", ""))
    except services.ApiAuthError as exc:
        response = JsonResponse({"error": str(exc)}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="decode-bench"'
        return response
    req = api.trigger_request_parse(request.body)
    try:
        created = bench_services.runs_trigger(benchmark=req.benchmark, trigger=Run.Trigger.API, user=token.user,
                                              variants=req.variants, commit=req.commit, ref=req.ref)
    except bench_services.TriggerError as exc:
        raise api.BadRequest(str(exc)) from None
    return JsonResponse({"runs": [selectors.run_json(r, base_url=_base_url(request)) for r in created]}, status=201)
