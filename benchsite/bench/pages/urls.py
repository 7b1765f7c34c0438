from django.urls import path

from . import views

app_name = "bench"

urlpatterns = [
    path("", views.benchmark_list, name="benchmarks"),
    path("b/<slug:slug>/", views.benchmark_detail, name="benchmark"),
    path("b/<slug:slug>/trigger/", views.benchmark_trigger, name="trigger"),
    path("b/<slug:slug>/annotations/", views.annotation_add, name="annotation-add"),
    path("b/<slug:slug>/waterfall/", views.benchmark_waterfall, name="waterfall"),
    path("b/<slug:slug>/compare/", views.compare_commits, name="compare-commits"),
    path("compare/", views.compare_runs, name="compare"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/artifacts/<int:artifact_id>/", views.run_artifact, name="run-artifact"),
    path("runs/<int:pk>/spec.json", views.run_spec, name="run-spec"),
    # JSON, separate from the HTML pages
    path("api/benchmarks/<slug:slug>/chart/", views.api_benchmark_chart, name="api-chart"),
    path("api/runs/<int:pk>/", views.api_run, name="api-run"),
]
