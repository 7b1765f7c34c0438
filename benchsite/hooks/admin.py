"""Staff-only admin: watches, every delivery with our answer, API tokens (hash only)."""
from django.contrib import admin, messages

from . import services
from .models import ApiToken, RepoWatch, WebhookDelivery


@admin.register(RepoWatch)
class RepoWatchAdmin(admin.ModelAdmin):
    list_display = ["repo_key", "repo_url", "branches", "secret_env", "created_at"]
    search_fields = ["repo_key", "repo_url"]
    filter_horizontal = ["benchmarks"]
    readonly_fields = ["repo_key", "created_at"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["received_at", "provider", "event", "repo_key", "branch", "short_commit", "status_code",
                    "accepted", "delivery_id"]
    list_filter = ["provider", "event", "status_code", "accepted"]
    search_fields = ["delivery_id", "repo_key", "branch", "commit"]
    date_hierarchy = "received_at"
    readonly_fields = [f.name for f in WebhookDelivery._meta.get_fields() if f.concrete and not f.many_to_many] + ["runs"]

    @admin.display(description="commit")
    def short_commit(self, obj):
        return obj.commit[:12]

    def has_add_permission(self, request):
        return False  # deliveries come from GitHub and GitLab only


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "user__username", "prefix"]
    fields = ["name", "user", "prefix", "created_at", "last_used_at", "revoked"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    raw_id_fields = ["user"]
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, raw = services.api_token_create(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.refresh_from_db()
        messages.warning(request, f"Token for {obj.name}: {raw}  (copy it now: it is shown only once)")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = services.api_tokens_revoke(tokens=queryset)
        messages.success(request, f"Revoked {count} token(s).")
