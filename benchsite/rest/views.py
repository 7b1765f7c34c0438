"""The JSON API's base view: DRF's APIView answering as the hand-written views did."""
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import APIView


def _release(response) -> None:
    """Once the answer is rendered, its data and the view are let go. DRF keeps them in reference
    cycles (the response's context holds the view, which holds the response; the request's parser
    context holds the view; Django's View.setup makes `head` the view's own bound `get`): left to
    the collector, a hundred runs' dicts outlive the request and make its full passes, tens of ms,
    come every few requests."""
    view = response.renderer_context.get("view")
    response.data = response.renderer_context = None
    if view is not None:
        view.response = view.request.parser_context = None
        view.__dict__.pop("head", None)


class JsonApiView(APIView):
    """A view of the JSON API: `methods` are the HTTP methods it answers (others get Django's 405,
    before anything else is checked); the rate limit (throttle_classes) comes before the token
    and the role (permission_classes), which read it only when they need it. Django's CSRF check
    stays on (a cookie-less POST gets its 403 before the view's 405) unless `csrf_exempt`: a view
    that takes a POST with a bearer token, not cookies."""
    methods: tuple[str, ...] = ("GET",)
    csrf_exempt = False

    @classmethod
    def as_view(cls, **initkwargs):
        view = super().as_view(**initkwargs)
        view.csrf_exempt = cls.csrf_exempt  # APIView.as_view exempts every view
        return view

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response):
            response.add_post_render_callback(_release)
        return response

    @property
    def default_response_headers(self):
        return {}  # no Allow or Vary on every answer, as before

    def initial(self, request, *args, **kwargs):
        # DRF's initial() in this order: the method, the rate limit, then the permissions. A request
        # over the limit is refused before its token is looked at, and a refused one counts too.
        if request.method not in self.methods:
            raise exceptions.MethodNotAllowed(request.method)
        self.format_kwarg = self.get_format_suffix(**kwargs)
        request.accepted_renderer, request.accepted_media_type = self.perform_content_negotiation(request)
        request.version, request.versioning_scheme = self.determine_version(request, *args, **kwargs)
        self.check_throttles(request)
        self.check_permissions(request)  # authenticates lazily: request.user reads the token
