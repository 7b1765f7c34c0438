from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "Decode bench administration"
admin.site.site_title = "Decode bench"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("benchsite.metrics.urls")),
    path("", include("benchsite.integrations.urls")),
    path("", include("benchsite.regressions.urls")),
    path("", include("benchsite.bench.pages.urls")),
]
