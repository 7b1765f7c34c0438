"""Thin views: a benchmark's change points (with marks, and its chart's marks as JSON), and marking one
expected or a false alarm."""
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from benchsite.bench.models import Benchmark
from benchsite.bench.domain.permissions import member_required
from benchsite.rest.answers import ApiError, ErrorSerializer
from benchsite.rest.views import JsonApiView
from runners import contract

from . import selectors
from .bisection import BisectError, bisection_start
from .changepoints import MarkError, changepoint_mark
from .models import ChangePoint
from .serializers import MarksQuerySerializer, MarksSerializer

# The buttons that mark a change point: what each does, in words.
MARK_WORDS = {ChangePoint.Status.EXPECTED: "Mark expected (restart the baseline)",
              ChangePoint.Status.FALSE_ALARM: "Mark as a false alarm",
              ChangePoint.Status.OPEN: "Reopen"}


@require_GET
def benchmark_changes(request, slug):
    benchmark = get_object_or_404(Benchmark, slug=slug)
    return render(request, "regressions/benchmark_changes.html", {
        "benchmark": benchmark, "change_points": selectors.benchmark_change_points(benchmark=benchmark),
        "statuses": [(s.value, MARK_WORDS[s]) for s in (ChangePoint.Status.EXPECTED, ChangePoint.Status.FALSE_ALARM,
                                                         ChangePoint.Status.OPEN)],
        "bisections": selectors.benchmark_bisections(benchmark=benchmark),
        "variants": benchmark.variants.order_by("position"),
    })


class ChartMarksView(JsonApiView):
    """The marks of a benchmark's chart (static/bench/chart.js asks for them). Open like the chart
    itself: no token, no rate limit; an unknown benchmark gets Django's 404 page."""

    @extend_schema(operation_id="marks_read", summary="The marks of a benchmark's chart: its verdicts that found a "
                   "change, and its change points", description=(
                       "What the benchmark page's chart marks, of a metric at a workload point. No token and no rate "
                       "limit; on a private dashboard, a logged-in session."), parameters=[
                       OpenApiParameter("slug", str, OpenApiParameter.PATH, description="the benchmark's slug"),
                       MarksQuerySerializer],
                   responses={200: OpenApiResponse(MarksSerializer, description="the marks"),
                              400: OpenApiResponse(ErrorSerializer, description="an unknown metric"),
                              404: OpenApiResponse(description="no such benchmark (an HTML page)")})
    def get(self, request, slug):
        benchmark = get_object_or_404(Benchmark, slug=slug)
        metric = request.GET.get("metric", contract.DECODE_TOK_S)
        if metric not in contract.METRICS:
            raise ApiError(f"unknown metric {metric!r}")
        point = request.GET.get("point", "")
        point = "" if point == benchmark.default_point else point  # the first point's marks are keyed ""
        return Response({"benchmark": slug, "metric": metric,
                         **selectors.chart_marks(benchmark=benchmark, metric=metric, point=point)})


@member_required
@require_POST
def change_point_mark(request, pk):
    change_point = get_object_or_404(ChangePoint.objects.select_related("benchmark"), pk=pk)
    try:
        changepoint_mark(change_point=change_point, status=request.POST.get("status", ""), user=request.user)
    except MarkError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"change point #{pk} marked {change_point.get_status_display()}")
    return redirect("regressions:changes", change_point.benchmark.slug)


@member_required
@require_POST
def bisection_create(request, slug):
    """Start a bisection by hand between two commits of the benchmark's repository."""
    benchmark = get_object_or_404(Benchmark, slug=slug)
    variant = benchmark.variants.filter(pk=request.POST.get("variant") or 0).first()
    if variant is None:
        messages.error(request, "choose a variant of this benchmark")
        return redirect("regressions:changes", slug)
    try:
        bisection = bisection_start(benchmark=benchmark, variant=variant, good=request.POST.get("good", "").strip(),
                                    bad=request.POST.get("bad", "").strip(), branch=request.POST.get("branch", "").strip(),
                                    metric=request.POST.get("metric") or contract.DECODE_TOK_S, user=request.user)
    except BisectError as exc:
        messages.error(request, f"bisection not started: {exc}")
    else:
        messages.success(request, f"bisection #{bisection.pk} started over {len(bisection.commits)} commits")
    return redirect("regressions:changes", slug)
