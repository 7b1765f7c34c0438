"""What the JSON API answers, and how: JSON as Django's JsonResponse writes it (whatever the Accept
header), and the errors ({"error": message} with its status; a 429's {"detail": message} with
Retry-After; 405 as Django's require_http_methods answers it; Django's own 404 page for a missing
benchmark). REST_FRAMEWORK in settings.py names these; this module imports no view of DRF's (DRF
imports it while it makes its APIView)."""
import json

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponseNotAllowed
from rest_framework import exceptions, renderers, serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response


class JsonRenderer(renderers.JSONRenderer):
    """JSON as JsonResponse writes it: ", " and ": " between items, non-ASCII escaped, no charset
    in the Content-Type. (DRF's own is compact, UTF-8 and refuses NaN.)"""

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return b"" if data is None else json.dumps(data, cls=DjangoJSONEncoder).encode()


class FirstRenderer(BaseContentNegotiation):
    """Every answer in the view's first renderer, whatever Accept or ?format= say (a 406 was
    never an answer of this API; ?format= is refused as an unknown parameter, as before)."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ErrorSerializer(serializers.Serializer):
    """What a refused request gets (400, 401, 403, 404, 409): the reason in words."""
    error = serializers.CharField()


class RateLimitedSerializer(serializers.Serializer):
    """A 429: too many requests this minute; Retry-After says when to come back."""
    detail = serializers.CharField()


class RateLimited(exceptions.Throttled):
    """A 429 with MESSAGE and Retry-After: WAIT seconds (DRF's Throttled would add its own words)."""

    def __init__(self, message: str, wait: int):
        super().__init__(detail=message)
        self.wait = wait


def exception_handler(exc, context):
    """The API's error answers (REST_FRAMEWORK's EXCEPTION_HANDLER). Django's Http404 and
    PermissionDenied are left to Django (its pages), as in the views before."""
    if isinstance(exc, exceptions.MethodNotAllowed):
        view = context["view"]
        return HttpResponseNotAllowed(getattr(view, "methods", None) or view.allowed_methods)
    if isinstance(exc, exceptions.Throttled):
        return Response({"detail": str(exc.detail)}, status=exc.status_code, headers={"Retry-After": str(exc.wait)})
    if isinstance(exc, exceptions.APIException):
        auth_header = getattr(exc, "auth_header", None)  # a 401's WWW-Authenticate (APIView.handle_exception)
        return Response({"error": str(exc.detail)}, status=exc.status_code,
                        headers={"WWW-Authenticate": auth_header} if auth_header else None)
    return None


class ApiError(exceptions.APIException):
    """A request refused with STATUS and {"error": MESSAGE}."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(detail=message)
        self.status_code = status

    @property
    def status(self) -> int:
        return self.status_code


def finish_document(result, generator, request, public):
    """drf-spectacular's postprocessing hook, in place of its enum components: each choice stays
    inline where it is used ({"enum": [...]}), without the marker the enum hook would read. A
    request body's object is closed (additionalProperties: false): the API refuses unknown fields."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            for content in operation.get("requestBody", {}).get("content", {}).values():
                name = content.get("schema", {}).get("$ref", "").rpartition("/")[2]
                if name in result["components"]["schemas"]:
                    result["components"]["schemas"][name]["additionalProperties"] = False

    def walk(node):
        if isinstance(node, dict):
            node.pop("x-spec-enum-id", None)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(result)
    return result
