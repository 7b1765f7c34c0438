"""Thin views: the webhook endpoints, the JSON API (Django REST framework: api_access.py says who
may ask what, serializers.py what the answers are) and the pull-request page."""
from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Run
from benchsite.rest.answers import ErrorSerializer, JsonRenderer, RateLimitedSerializer
from benchsite.rest.views import JsonApiView

from . import api, api_access, ratelimit, selectors, webhooks
from .forges import forge_for
from .pulls import selectors as pull_selectors
from .pulls.page import pull_page_context
from .serializers import (COMMIT_SHA, CommitSerializer, PullSerializer, RunFiltersSerializer, RunsSerializer,
                          TriggerSerializer)


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


_ERRORS = {400: "bad parameters or body", 401: "missing or invalid bearer token (WWW-Authenticate says how to send one)",
           403: "the token's user is a viewer", 404: "no such benchmark, commit or pull request",
           409: "no worker serves the benchmark's pool (send force: true)"}


def _answers(ok: dict, *errors: int) -> dict:
    """An operation's answers for the document: OK ({status: (serializer, words)}), ERRORS and the 429."""
    answers = {status: OpenApiResponse(serializer, description=words) for status, (serializer, words) in ok.items()}
    answers.update({status: OpenApiResponse(ErrorSerializer, description=_ERRORS[status]) for status in errors})
    answers[429] = OpenApiResponse(RateLimitedSerializer, description="rate limited: more than "
                                   "BENCH_API_REQUESTS_PER_MIN requests this minute from the token or address")
    return answers


_HEADERS = [OpenApiParameter("Retry-After", int, OpenApiParameter.HEADER, response=[429],
                             description="seconds until the next minute, when the count starts again"),
            OpenApiParameter("WWW-Authenticate", str, OpenApiParameter.HEADER, response=[401],
                             description=api_access.REALM)]


class RunsView(api_access.ApiView):
    """Runs, newest first (GET); trigger a benchmark (POST, members' tokens)."""
    methods = ("GET", "POST")
    csrf_exempt = True  # bearer tokens, not cookies: no CSRF exposure
    method_permissions = {"POST": [api_access.MayTrigger]}

    @extend_schema(operation_id="runs_list", summary="Runs, newest first", description=(
                       "Each run with its figures, outcome and verdicts; a private dashboard takes a token. Unknown "
                       "parameters are refused."), parameters=[RunFiltersSerializer, *_HEADERS],
                   responses=_answers({200: (RunsSerializer, "the runs")}, 400, 401))
    def get(self, request):
        found = selectors.runs_filter(filters=api.run_filters_parse(request.GET))
        return Response({"runs": selectors.runs_json(found, base_url=_base_url(request))})

    @extend_schema(operation_id="runs_trigger", summary="Trigger a benchmark at a commit or ref (members' tokens)",
                   description="Queues a run of each variant asked for (all of them by default).",
                   request=TriggerSerializer, parameters=_HEADERS,
                   responses=_answers({201: (RunsSerializer, "the runs created")}, 400, 401, 403, 404, 409))
    def post(self, request):
        req = api.trigger_request_parse(request.body)
        pool = pools.pool_status(req.benchmark.gpu_pool)
        if not pool["served"] and not req.force:
            raise api.BadRequest(f"{pool['message']}: the runs would wait until a worker of the pool starts; "
                                 'send "force": true to queue them all the same', status=409)
        try:
            created = trigger.runs_trigger(benchmark=req.benchmark, trigger=Run.Trigger.API, user=request.user,
                                           variants=req.variants, commit=req.commit, ref=req.ref, repeats=req.repeats)
        except trigger.TriggerError as exc:
            raise api.BadRequest(str(exc)) from None
        return Response({"runs": selectors.runs_json(created, base_url=_base_url(request))}, status=201)


class CommitView(api_access.ApiView):
    @extend_schema(operation_id="commit_read", summary="A commit's outcome and the runs that decide it",
                   description="Bisection and canary runs decide no commit's outcome.",
                   parameters=[OpenApiParameter("sha", str, OpenApiParameter.PATH, description=COMMIT_SHA), *_HEADERS],
                   responses=_answers({200: (CommitSerializer, "the commit's outcome")}, 400, 401, 404))
    def get(self, request, sha):
        found = selectors.commit_json(selectors.commit_resolve(sha), base_url=_base_url(request))
        if not found["runs"]:
            raise api.BadRequest(f"commit {found['commit']} has only bisection or canary runs: none decides "
                                 "its outcome", status=404)
        return Response(found)


class PullView(api_access.ApiView):
    @extend_schema(operation_id="pull_read", summary="A pull request's outcome: its latest head's comparisons, "
                   "their tables and runs", description="Also its earlier pushes' comparisons and who asked for "
                   "what. Another form of /api/pulls/ URL is a 404 that says this one.", parameters=[
                       OpenApiParameter("host", str, OpenApiParameter.PATH,
                                        description="the repository's host: github.com, gitlab.com, ..."),
                       OpenApiParameter("repo", str, OpenApiParameter.PATH,
                                        description="the repository's path on its host, its slashes as they are: "
                                                    "owner/name, group/sub/name"),
                       OpenApiParameter("number", int, OpenApiParameter.PATH,
                                        description="the pull request's number (GitLab: the merge request's iid)"),
                       *_HEADERS],
                   responses=_answers({200: (PullSerializer, "the pull request")}, 401, 404))
    def get(self, request, host, repo, number):
        pull = pull_selectors.pull_find(host=host, repo=repo, number=number)
        if pull is None:
            raise api.BadRequest(f"no pull request {host}/{repo}#{number}: none of a watched repository by that "
                                 "number was delivered", status=404)
        return Response(selectors.pull_json(pull_selectors.pull_summary(pull), base_url=_base_url(request)))


@extend_schema(exclude=True)  # a JSON 404 that says the form, for any other /api/pulls/ URL
class PullMalformedView(api_access.ApiView):
    permission_classes = []

    def get(self, request):
        raise api.BadRequest(f"{request.path!r} names no pull request: use /api/pulls/<host>/<owner>/<name>/<number>/",
                             status=404)


@require_http_methods(["GET"])
def pull_page(request, host, repo, number):
    pull = pull_selectors.pull_find(host=host, repo=repo, number=number)
    if pull is None:
        return render(request, "hooks/pull_missing.html", {"repo_key": f"{host}/{repo}", "number": number},
                      status=404)
    return render(request, "hooks/pull.html", pull_page_context(pull_selectors.pull_summary(pull)))


@extend_schema(exclude=True)
class OpenApiDocument(JsonApiView, SpectacularAPIView):
    """/api/openapi.json: drf-spectacular's document of the API, generated once per process."""
    renderer_classes = [JsonRenderer]
    document = None

    def get(self, request, *args, **kwargs):
        if OpenApiDocument.document is None:
            OpenApiDocument.document = self.generator_class(urlconf=self.urlconf).get_schema(request=request, public=True)
        return Response(OpenApiDocument.document)
