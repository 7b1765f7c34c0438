from django.urls import path, re_path

from . import views

app_name = "hooks"

urlpatterns = [
    path("webhooks/github/", views.webhook, {"provider": "github"}, name="github"),
    path("webhooks/gitlab/", views.webhook, {"provider": "gitlab"}, name="gitlab"),
    path("api/runs/", views.runs, name="api-runs"),
    path("api/commits/<str:sha>/", views.commit, name="api-commit"),
    path("api/pulls/<str:host>/<path:repo>/<int:number>/", views.pull_api, name="api-pull"),
    re_path(r"^api/pulls/", views.pull_api_malformed),  # a JSON 404 that says the form, not an HTML page
    path("api/openapi.json", views.openapi_document, name="openapi"),
    # host, then the repository's path (GitLab's subgroups make it longer than owner/name)
    path("pr/<str:host>/<path:repo>/<int:number>/", views.pull_page, name="pull"),
]
