"""Thin views: the webhook endpoints, the JSON runs API and the pull-request page."""
from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from benchsite.bench.domain import permissions
from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Run

from . import api, openapi, ratelimit, selectors, tokens, webhooks
from .forges import forge_for
from .pulls import selectors as pull_selectors
from .pulls.page import pull_page_context


def _read_bounded(request) -> bytes | None:
    """The raw body, or None when it is over the limit. Read from the stream: Django's own
    request.body would stop at DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) with a 400."""
    body = request.read(webhooks.MAX_BODY_BYTES + 1)
    return None if len(body) > webhooks.MAX_BODY_BYTES else body


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
    provider = forge_for(provider)
    address = request.META.get("REMOTE_ADDR", "")
    # Only deliveries that fail verification count against their address: a valid signed one is
    # never limited (GitHub does not retry a 429). Past the limit, refusals are not stored either.
    limited = ratelimit.count("webhook-refused", address) >= settings.BENCH_WEBHOOK_REFUSED_PER_MIN
    size = _content_length(request)
    body = None if size is not None and size > webhooks.MAX_BODY_BYTES else _read_bounded(request)
    if body is None:
        answer = webhooks.webhook_refuse_oversize(provider=provider, headers=request.headers, size=size)
    else:
        answer = webhooks.webhook_receive(provider=provider, headers=request.headers, body=body,
                                          content_type=request.content_type or "", store_refused=not limited)
    if answer.status in webhooks.UNVERIFIED_STATUSES:
        ratelimit.hit("webhook-refused", address)
        if limited:
            return _too_many(f"too many unverified deliveries from {address}: {answer.detail}")
    return JsonResponse(answer.as_json(), status=answer.status)


def _base_url(request) -> str:
    return f"{request.scheme}://{request.get_host()}"


def _api_limited(request) -> JsonResponse | None:
    """The 429 answer when this token or address asked too often this minute, else None."""
    authorization = request.headers.get("Authorization", "")
    ident = f"token:{authorization}" if authorization else f"address:{request.META.get('REMOTE_ADDR', '')}"
    if ratelimit.over("api", ident, limit=settings.BENCH_API_REQUESTS_PER_MIN):
        return _too_many(f"more than {settings.BENCH_API_REQUESTS_PER_MIN} requests a minute for this "
                         f"{'token' if authorization else 'address'}")
    return None


def _api_error(exc: api.BadRequest) -> JsonResponse:
    response = JsonResponse({"error": str(exc)}, status=exc.status)
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="decode-bench"'
    return response


def _may_read(request) -> None:
    if settings.BENCH_PRIVATE_DASHBOARD and not request.user.is_authenticated:
        _authenticated(request)  # a private dashboard: reading runs takes a token too


@csrf_exempt  # bearer tokens, not cookies: no CSRF exposure
@require_http_methods(["GET", "POST"])
def runs(request):
    if limited := _api_limited(request):
        return limited
    try:
        if request.method == "GET":
            _may_read(request)
            found = selectors.runs_filter(filters=api.run_filters_parse(request.GET))
            return JsonResponse({"runs": selectors.runs_json(found, base_url=_base_url(request))})
        return _trigger(request)
    except api.BadRequest as exc:
        return _api_error(exc)


@require_http_methods(["GET"])
def commit(request, sha):
    """A commit's outcome and the runs that decide it."""
    if limited := _api_limited(request):
        return limited
    try:
        _may_read(request)
        found = selectors.commit_json(selectors.commit_resolve(sha), base_url=_base_url(request))
        if not found["runs"]:
            raise api.BadRequest(f"commit {found['commit']} has only bisection or canary runs: none decides "
                                 "its outcome", status=404)
        return JsonResponse(found)
    except api.BadRequest as exc:
        return _api_error(exc)


@require_http_methods(["GET"])
def pull_api(request, host, repo, number):
    """A pull request's outcome, its latest head's comparisons with their tables, and its history."""
    if limited := _api_limited(request):
        return limited
    try:
        _may_read(request)
        pull = pull_selectors.pull_find(host=host, repo=repo, number=number)
        if pull is None:
            raise api.BadRequest(f"no pull request {host}/{repo}#{number}: none of a watched repository by that "
                                 "number was delivered", status=404)
        return JsonResponse(selectors.pull_json(pull_selectors.pull_summary(pull), base_url=_base_url(request)))
    except api.BadRequest as exc:
        return _api_error(exc)


@require_http_methods(["GET"])
def pull_api_malformed(request):
    if limited := _api_limited(request):
        return limited
    return _api_error(api.BadRequest(f"{request.path!r} names no pull request: use "
                                     "/api/pulls/<host>/<owner>/<name>/<number>/", status=404))


@require_http_methods(["GET"])
def pull_page(request, host, repo, number):
    pull = pull_selectors.pull_find(host=host, repo=repo, number=number)
    if pull is None:
        return render(request, "hooks/pull_missing.html", {"repo_key": f"{host}/{repo}", "number": number},
                      status=404)
    return render(request, "hooks/pull.html", pull_page_context(pull_selectors.pull_summary(pull)))


def _authenticated(request):
    try:
        return tokens.api_token_authenticate(authorization=request.headers.get("Authorization", ""))
    except tokens.ApiAuthError as exc:
        raise api.BadRequest(str(exc), status=401) from None


def _trigger(request):
    token = _authenticated(request)
    if not permissions.is_member(token.user):
        raise api.BadRequest(f"user {token.user.get_username()!r} is a viewer: only members trigger runs", status=403)
    req = api.trigger_request_parse(request.body)
    pool = pools.pool_status(req.benchmark.gpu_pool)
    if not pool["served"] and not req.force:
        raise api.BadRequest(f"{pool['message']}: the runs would wait until a worker of the pool starts; "
                             'send "force": true to queue them all the same', status=409)
    try:
        created = trigger.runs_trigger(benchmark=req.benchmark, trigger=Run.Trigger.API, user=token.user,
                                              variants=req.variants, commit=req.commit, ref=req.ref,
                                              repeats=req.repeats)
    except trigger.TriggerError as exc:
        raise api.BadRequest(str(exc)) from None
    return JsonResponse({"runs": selectors.runs_json(created, base_url=_base_url(request))}, status=201)


@require_http_methods(["GET"])
def openapi_document(request):
    return JsonResponse(openapi.openapi_document())
