from django.urls import path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from . import views

app_name = "hooks"

urlpatterns = [
    path("webhooks/github/", views.webhook, {"provider": "github"}, name="github"),
    path("webhooks/gitlab/", views.webhook, {"provider": "gitlab"}, name="gitlab"),
    path("api/runs/", views.RunsView.as_view(), name="api-runs"),
    path("api/commits/<str:sha>/", views.CommitView.as_view(), name="api-commit"),
    path("api/pulls/<str:host>/<path:repo>/<int:number>/", views.PullView.as_view(), name="api-pull"),
    re_path(r"^api/pulls/", views.PullMalformedView.as_view()),  # a JSON 404 that says the form, not an HTML page
    path("api/openapi.json", views.OpenApiDocument.as_view(), name="openapi"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="hooks:openapi"), name="api-docs"),  # Swagger UI
    # host, then the repository's path (GitLab's subgroups make it longer than owner/name)
    path("pr/<str:host>/<path:repo>/<int:number>/", views.pull_page, name="pull"),
]
