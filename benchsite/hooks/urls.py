from django.urls import path

from . import views

app_name = "hooks"

urlpatterns = [
    path("webhooks/github/", views.webhook, {"provider": "github"}, name="github"),
    path("webhooks/gitlab/", views.webhook, {"provider": "gitlab"}, name="gitlab"),
    path("api/runs/", views.runs, name="api-runs"),
    path("api/openapi.json", views.openapi_document, name="openapi"),
]
