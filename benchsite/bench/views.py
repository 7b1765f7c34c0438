"""Thin views: HTML pages and the JSON endpoints they read. Reads in selectors, writes in services."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from . import selectors, services
from .forms import TriggerForm
from .models import Run


def _benchmark_page(request, benchmark, form, status=200):
    context = {
        "benchmark": benchmark,
        "ladder": selectors.benchmark_ladder(benchmark=benchmark),
        "runs": selectors.benchmark_recent_runs(benchmark=benchmark),
        "form": form,
        "metrics": selectors.CHART_METRICS.values(),
        "default_metric": selectors.DEFAULT_CHART_METRIC,
    }
    return render(request, "bench/benchmark_detail.html", context, status=status)


@require_GET
def benchmark_list(request):
    return render(request, "bench/benchmark_list.html", {"benchmarks": selectors.benchmark_list()})


@require_GET
def benchmark_detail(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    form = TriggerForm(benchmark=benchmark) if request.user.is_authenticated else None
    return _benchmark_page(request, benchmark, form)


@login_required
@require_http_methods(["GET", "POST"])
def benchmark_trigger(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    if request.method == "GET":  # e.g. back from the login page: the form is on the benchmark page
        return redirect("bench:benchmark", slug=slug)
    form = TriggerForm(request.POST, request.FILES, benchmark=benchmark)
    if form.is_valid():
        upload = form.cleaned_data["patch"]
        try:
            runs = services.runs_trigger(
                benchmark=benchmark,
                trigger=Run.Trigger.FORM,
                user=request.user,
                variants=list(form.cleaned_data["variants"]),
                ref=form.cleaned_data["ref"],
                patches=[services.patch_create(**upload)] if upload else [],
            )
        except services.TriggerError as exc:
            form.add_error(None, str(exc))
        else:
            names = ", ".join(run.variant.name for run in runs)
            messages.success(request, f"Queued {len(runs)} run(s): {names}.")
            return redirect("bench:benchmark", slug=slug)
    return _benchmark_page(request, benchmark, form, status=400)


@require_GET
def run_detail(request, pk):
    run = get_object_or_404(selectors.run_queryset(), pk=pk)
    log_artifact, log_tail = selectors.run_log_tail(run=run)
    context = {
        "run": run,
        "measurements": selectors.run_measurements(run=run),
        "artifacts": selectors.run_artifacts(run=run),
        "log_artifact": log_artifact,
        "log_tail": log_tail,
        "log_tail_lines": selectors.LOG_TAIL_LINES,
        "heartbeat_age_s": selectors.heartbeat_age_s(run),
        "timings": selectors.run_timings(run=run),
        "decomposition": selectors.run_decomposition(run=run),
    }
    return render(request, "bench/run_detail.html", context)


@login_required
@require_POST
def run_cancel(request, pk):
    run = get_object_or_404(Run, pk=pk)
    if services.run_cancel(run=run):
        messages.success(request, f"Run {run.pk} cancelled.")
    else:
        messages.warning(request, f"Run {run.pk} is already {run.state}: nothing to cancel.")
    return redirect("bench:run", pk=run.pk)


# --- JSON ------------------------------------------------------------------------------


@require_GET
def api_benchmark_chart(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    metric = request.GET.get("metric", selectors.DEFAULT_CHART_METRIC)
    try:
        data = selectors.benchmark_chart(benchmark=benchmark, metric=metric)
    except selectors.UnknownMetric:
        return JsonResponse(
            {"error": f"unknown metric {metric!r}", "metrics": sorted(selectors.CHART_METRICS)}, status=400
        )
    return JsonResponse(data)


@require_GET
def api_run(request, pk):
    run = get_object_or_404(selectors.run_queryset(), pk=pk)
    return JsonResponse(selectors.run_status(run=run))
