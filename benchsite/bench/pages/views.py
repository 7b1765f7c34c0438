"""Thin views: HTML pages and the JSON endpoints they read. Reads in selectors (and the page
modules home, history, waterfall, compare, runpage), writes in lifecycle/."""
from django.contrib import messages
from django.http import Http404, HttpResponse, HttpResponseForbidden, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..storage import artifacts as artifact_store
from . import compare, history, home, runpage, selectors, waterfall
from ..domain import rollups
from ..domain import permissions
from ..worker import pools
from ..lifecycle import cancel, trigger
from .annotations import AnnotationForm, annotation_create
from ..domain.branches import main_line
from .forms import TriggerForm
from .noise import variant_noise
from ..lifecycle.trigger_plan import trigger_plan
from ..models import Artifact, Run


def _bad_request(request, message: str):
    return render(request, "bench/bad_request.html", {"message": message}, status=400)


def _chart_points(request, benchmark) -> dict:
    """The point selector of the history charts (?point=): the benchmark's points, the chosen one."""
    try:
        point = history.chart_point(benchmark, request.GET.get("point"))
    except history.BadChartQuery:
        point = ""  # an unknown point on the page: the first point's charts
    return {"points": [p.id for p in benchmark.points], "chart_point": point or benchmark.default_point}


def _benchmark_page(request, benchmark, form, status=200, annotation_form=None):
    ladder = selectors.benchmark_ladder(benchmark=benchmark)
    noise = variant_noise(variants=ladder)
    for variant in ladder:
        variant.noise = noise.get(variant.pk)
    context = {
        "benchmark": benchmark,
        "ladder": ladder,
        "runs": selectors.benchmark_recent_runs(benchmark=benchmark),
        "form": form,
        "annotation_form": annotation_form or (AnnotationForm() if permissions.is_member(request.user) else None),
        "annotations": list(benchmark.annotations.select_related("created_by")),
        "history_tables": history.history_tables(benchmark=benchmark, metrics=history.page_metrics(benchmark)),
        **_chart_points(request, benchmark),
        "main_line": main_line(benchmark),
        "run_url_prefix": _run_url_prefix(),
    }
    return render(request, "bench/benchmark_detail.html", context, status=status)


def _run_url_prefix() -> str:
    """The run page's URL without the id: rows link to runs without a reverse() each."""
    return reverse("bench:run", args=[0])[:-2]


@require_GET
def benchmark_list(request):
    return render(request, "bench/benchmark_list.html", {"summaries": home.home_benchmarks(),
                                                         "run_url_prefix": _run_url_prefix(),
                                                         "compare_url": reverse("bench:compare")})


@require_GET
def benchmark_detail(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    form = TriggerForm(benchmark=benchmark) if permissions.is_member(request.user) else None
    return _benchmark_page(request, benchmark, form)


@permissions.member_required
@require_http_methods(["GET", "POST"])
def benchmark_trigger(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    if request.method == "GET":  # e.g. back from the login page: the form is on the benchmark page
        return redirect("bench:benchmark", slug=slug)
    form = TriggerForm(request.POST, request.FILES, benchmark=benchmark)
    if form.is_valid() and request.POST.get("step") == "review":  # the form's button: summary first
        return _trigger_review(request, benchmark, form)
    pool = pools.pool_status(benchmark.gpu_pool)
    if form.is_valid() and not pool["served"] and request.POST.get("force") != "1":
        return _trigger_review(request, benchmark, form, status=409,
                               error=f"{pool['message']}: tick “Queue anyway” to queue the runs all the same.")
    if form.is_valid():  # the confirm page's button (or a scripted POST without the review step)
        upload = form.cleaned_data["patch"]
        try:
            runs = trigger.runs_trigger(
                benchmark=benchmark,
                trigger=Run.Trigger.FORM,
                user=request.user,
                variants=list(form.cleaned_data["variants"]),
                ref=form.cleaned_data["ref"],
                patches=[trigger.patch_create(**upload)] if upload else [],
                repeats=form.cleaned_data["repeats"],
            )
        except trigger.TriggerError as exc:
            form.add_error(None, str(exc))
        else:
            links = format_html_join(", ", '<a href="{}">#{} {}</a>',
                                     ((reverse("bench:run", args=[run.pk]), run.pk, run.variant.name) for run in runs))
            messages.success(request, format_html("Queued {} run(s): {}.", len(runs), links))
            return redirect("bench:benchmark", slug=slug)
    return _benchmark_page(request, benchmark, form, status=400)


def _trigger_review(request, benchmark, form, status=200, error=""):
    """The page that spells out what the trigger will queue (and on which pool) before it does."""
    variants = list(form.cleaned_data["variants"].prefetch_related("patches"))
    plan = trigger_plan(benchmark=benchmark, variants=variants, ref=form.cleaned_data["ref"],
                        patch=form.cleaned_data["patch"], repeats=form.cleaned_data["repeats"])
    return render(request, "bench/trigger_confirm.html",
                  {"benchmark": benchmark, "plan": plan, "variant_ids": [v.pk for v in variants], "error": error},
                  status=status)


@permissions.member_required
@require_POST
def annotation_add(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    form = AnnotationForm(request.POST)
    if not form.is_valid():
        trigger = TriggerForm(benchmark=benchmark)
        return _benchmark_page(request, benchmark, trigger, status=400, annotation_form=form)
    annotation_create(benchmark=benchmark, user=request.user, **form.cleaned_data)
    messages.success(request, "Annotation added: it shows on every chart of this benchmark.")
    return redirect("bench:benchmark", slug=slug)


@require_GET
def benchmark_waterfall(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    try:
        point = history.chart_point(benchmark, request.GET.get("point"))
        data = waterfall.benchmark_waterfall(benchmark=benchmark, at=request.GET.get("commit"), point=point)
    except (waterfall.BadWaterfallQuery, history.BadChartQuery) as exc:
        return _bad_request(request, str(exc))
    except waterfall.NoRunsAt as exc:
        if request.GET.get("commit") or request.GET.get("point"):
            raise Http404(str(exc)) from None
        data = None
    return render(request, "bench/waterfall.html", {"benchmark": benchmark, "waterfall": data,
                                                    "chart_data": waterfall.waterfall_chart_data(data),
                                                    "share_axis": waterfall.share_axis(),
                                                    "points": [p.id for p in benchmark.points],
                                                    "point": point or benchmark.default_point})


@require_GET
def compare_runs(request):
    try:
        a_id, b_id = compare.parse_run_ids(request.GET.get("a"), request.GET.get("b"))
    except compare.BadCompareQuery as exc:
        return _bad_request(request, str(exc))
    a = get_object_or_404(compare.compare_queryset(), pk=a_id)
    b = get_object_or_404(compare.compare_queryset(), pk=b_id)
    pairs = [{"a": a, "b": b, "metrics": compare.metric_rows(a, b), "points": compare.point_rows(a, b),
              "config": compare.config_rows(a, b)}]
    return render(request, "bench/compare.html", {"pairs": pairs, "title": f"run #{a.pk} vs run #{b.pk}"})


@require_GET
def compare_commits(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    try:
        a, b = compare.parse_commits(request.GET.get("a"), request.GET.get("b"))
    except compare.BadCompareQuery as exc:
        return _bad_request(request, str(exc))
    pairs = [{"a": x, "b": y, "metrics": compare.metric_rows(x, y), "points": compare.point_rows(x, y),
              "config": compare.config_rows(x, y)}
             for x, y in compare.commit_pairs(benchmark=benchmark, a=a, b=b)]
    if not pairs:
        raise Http404(f"no variant of {benchmark.name} ran successfully at both {a} and {b}")
    return render(request, "bench/compare.html",
                  {"pairs": pairs, "benchmark": benchmark, "title": f"{benchmark.name}: {a[:10]} vs {b[:10]}"})


@require_GET
def run_detail(request, pk):
    run = get_object_or_404(selectors.run_queryset(), pk=pk)
    log_artifact, log_tail = selectors.run_log_tail(run=run)
    measurements = selectors.run_measurements(run=run)
    context = {
        "run": run,
        "measurements": measurements,
        "artifacts": selectors.run_artifacts(run=run),
        "log_artifact": log_artifact,
        "log_tail": log_tail,
        "log_tail_lines": selectors.LOG_TAIL_LINES,
        "queue": pools.run_queue(run),
        "heartbeat_age_s": selectors.heartbeat_age_s(run),
        "elapsed_s": runpage.run_elapsed_s(run),
        "timings": selectors.run_timings(run=run),
        "correctness": runpage.run_correctness(measurements=measurements),
        "budget": runpage.run_budget(measurements=measurements),
        "points": runpage.run_points(run=run),
        "reproduce": runpage.run_reproduce(run=run),
        "can_cancel": not run.is_final and permissions.run_cancellable_by(run, request.user),
        "main_line": main_line(run.benchmark),
    }
    return render(request, "bench/run_detail.html", context)


@require_GET
def run_artifact(request, pk, artifact_id):
    """Streams the stored file a chunk at a time (a profiler trace of hundreds of MB, whole)."""
    artifact = get_object_or_404(Artifact, pk=artifact_id, run_id=pk)
    if not artifact.file:
        raise Http404(artifact.error or "this artifact was not stored")
    try:
        stream = artifact_store.open_stream(artifact.file)
    except artifact_store.ArtifactError as exc:
        raise Http404(str(exc)) from None
    safe_name = "".join(c if c.isalnum() or c in "._-" else "_" for c in artifact.name) or "artifact.txt"
    text = artifact.kind != Artifact.Kind.PROFILER_TRACE and not safe_name.endswith(".gz")
    response = StreamingHttpResponse(artifact_store.iter_chunks(stream),
                                     content_type="text/plain; charset=utf-8" if text else "application/octet-stream")
    response["Content-Length"] = str(artifact.size)
    response["Content-Disposition"] = f'attachment; filename="run-{pk}-{safe_name}"'
    return response


@require_GET
def run_spec(request, pk):
    run = get_object_or_404(selectors.run_queryset(), pk=pk)
    reproduce = runpage.run_reproduce(run=run)
    response = HttpResponse(reproduce["spec_json"], content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{reproduce["spec_name"]}"'
    # the spec the run was sent, or (a run from before specs were kept) a rebuilt one: say which
    response["X-Job-Spec"] = "as sent" if reproduce["as_sent"] else reproduce["note"]
    return response


@permissions.member_required
@require_POST
def run_cancel(request, pk):
    run = get_object_or_404(Run, pk=pk)
    if not permissions.run_cancellable_by(run, request.user):
        return HttpResponseForbidden("Members cancel the runs they triggered; staff cancel any run.")
    if cancel.run_cancel(run=run):
        messages.success(request, f"Run {run.pk} cancelled.")
    else:
        messages.warning(request, f"Run {run.pk} is already {run.state}: nothing to cancel.")
    return redirect("bench:run", pk=run.pk)


# --- JSON ------------------------------------------------------------------------------


@require_GET
def api_benchmark_chart(request, slug):
    benchmark = get_object_or_404(selectors.benchmark_queryset(), slug=slug)
    try:
        metric = history.chart_metric(request.GET.get("metric"))
        max_points = history.chart_max_points(request.GET.get("max_points"))
        point = history.chart_point(benchmark, request.GET.get("point"))
    except history.BadChartQuery as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    body = rollups.chart_json(benchmark=benchmark, metric=metric, max_points=max_points, point=point)
    return HttpResponse(body, content_type="application/json")


@require_GET
def api_run(request, pk):
    run = get_object_or_404(selectors.run_queryset(), pk=pk)
    return JsonResponse(runpage.run_live(run=run))
