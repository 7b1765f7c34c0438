"""Who may do what. Three roles:

- viewer: browses (anonymous visitors too, unless BENCH_PRIVATE_DASHBOARD makes them log in);
- member: a viewer who triggers runs, annotates and marks change points, and cancels the runs
  they triggered. Every active logged-in user, or only those in the group named by
  BENCH_MEMBER_GROUP when it is set (others are viewers);
- staff (`is_staff`): cancels any run and manages benchmarks, watches and API tokens (the admin).

Views use the decorators; templates may ask `run_cancellable_by`.
"""
from functools import wraps

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseForbidden

VIEWER, MEMBER, STAFF = "viewer", "member", "staff"


def user_role(user) -> str:
    if user is None or not user.is_authenticated or not user.is_active:
        return VIEWER
    if user.is_staff:
        return STAFF
    group = settings.BENCH_MEMBER_GROUP
    if group and not user.groups.filter(name=group).exists():
        return VIEWER
    return MEMBER


def is_member(user) -> bool:
    return user_role(user) in (MEMBER, STAFF)


def run_cancellable_by(run, user) -> bool:
    role = user_role(user)
    return role == STAFF or (role == MEMBER and run.triggered_by_id == user.pk)


def member_required(view):
    """Anonymous: to the login page. Logged in without the member role: 403 with the reason."""
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_member(request.user):
            return HttpResponseForbidden("Only members may do this: ask a staff member to add you to the "
                                         f"{settings.BENCH_MEMBER_GROUP!r} group.")
        return view(request, *args, **kwargs)
    return wrapper


# Reachable without a session even on a private dashboard: they authenticate otherwise
# (HMAC signature, bearer token, the admin's own login) or are the login itself.
PUBLIC_PREFIXES = ("/accounts/", "/webhooks/", "/admin/", "/api/runs/", "/api/commits/", "/api/pulls/",
                   "/api/openapi.json", "/api/docs", "/static/", "/metrics")


class PrivateDashboardMiddleware:
    """With BENCH_PRIVATE_DASHBOARD=1, anonymous visitors are sent to the login page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (settings.BENCH_PRIVATE_DASHBOARD and not request.user.is_authenticated
                and not request.path.startswith(PUBLIC_PREFIXES)):
            return redirect_to_login(request.get_full_path())
        return self.get_response(request)
