from django.urls import path

from . import views

app_name = "bench"

urlpatterns = [
    path("", views.benchmark_list, name="benchmarks"),
    path("b/<slug:slug>/", views.benchmark_detail, name="benchmark"),
    path("b/<slug:slug>/trigger/", views.benchmark_trigger, name="trigger"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run-cancel"),
    # JSON, separate from the HTML pages
    path("api/benchmarks/<slug:slug>/chart/", views.api_benchmark_chart, name="api-chart"),
    path("api/runs/<int:pk>/", views.api_run, name="api-run"),
]
