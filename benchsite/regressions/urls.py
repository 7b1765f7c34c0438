from django.urls import path

from . import views

app_name = "regressions"
urlpatterns = [
    path("b/<slug:slug>/changes/", views.benchmark_changes, name="changes"),
    path("api/benchmarks/<slug:slug>/marks/", views.ChartMarksView.as_view(), name="api-marks"),
    path("changes/<int:pk>/mark/", views.change_point_mark, name="mark"),
    path("b/<slug:slug>/bisect/", views.bisection_create, name="bisect"),
]
