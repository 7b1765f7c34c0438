"""Staff-only admin: watches, every delivery with our answer, API tokens (hash only), pull
requests with their comparisons and the record of who asked for what, regression issues."""
from django.contrib import admin, messages

from . import tokens
from .issues.models import ForgeIssue
from .models import ApiToken, RepoWatch, WebhookDelivery
from .pulls.models import Comparison, PullAction, PullRequest, PullRun


@admin.register(RepoWatch)
class RepoWatchAdmin(admin.ModelAdmin):
    list_display = ["repo_key", "repo_url", "branches", "secret_env", "issues", "created_at"]
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
        token, raw = tokens.api_token_create(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.refresh_from_db()
        messages.warning(request, f"Token for {obj.name}: {raw}  (copy it now: it is shown only once)")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        count = tokens.api_tokens_revoke(tokens=queryset)
        messages.success(request, f"Revoked {count} token(s).")


class PullActionInline(admin.TabularInline):
    model = PullAction
    extra = 0
    can_delete = False
    fields = readonly_fields = ["at", "kind", "actor", "association", "accepted", "head_sha", "detail"]

    def has_add_permission(self, request, obj=None):
        return False  # the record of who asked for what: written by the webhook handling only


@admin.register(PullRequest)
class PullRequestAdmin(admin.ModelAdmin):
    list_display = ["repo_key", "number", "title", "state", "is_fork", "draft", "updated_at"]
    list_filter = ["provider", "state", "is_fork", "draft"]
    search_fields = ["repo_key", "title", "author", "head_sha", "head_branch"]
    readonly_fields = ["created_at", "updated_at"]
    raw_id_fields = ["watch"]
    inlines = [PullActionInline]


class PullRunInline(admin.TabularInline):
    model = PullRun
    extra = 0
    raw_id_fields = ["run"]
    fields = ["run", "role", "round"]


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["pull", "benchmark", "short_head", "state", "outcome", "requested_by", "created_at"]
    list_filter = ["state", "outcome", "benchmark"]
    search_fields = ["pull__repo_key", "head_sha", "merge_base", "requested_by"]
    date_hierarchy = "created_at"
    list_select_related = ["pull", "benchmark"]
    raw_id_fields = ["pull"]
    readonly_fields = ["created_at"]
    inlines = [PullRunInline]

    @admin.display(description="head", ordering="head_sha")
    def short_head(self, obj):
        return obj.head_sha[:12]


@admin.register(PullAction)
class PullActionAdmin(admin.ModelAdmin):
    """Approvals (a label), forced runs (/bench, Re-run) and refusals, as they were recorded."""

    list_display = ["pull", "kind", "actor", "association", "accepted", "short_head", "at"]
    list_filter = ["kind", "accepted", "association"]
    search_fields = ["pull__repo_key", "actor", "head_sha", "detail"]
    date_hierarchy = "at"
    list_select_related = ["pull"]
    readonly_fields = [f.name for f in PullAction._meta.get_fields() if f.concrete]

    @admin.display(description="head", ordering="head_sha")
    def short_head(self, obj):
        return obj.head_sha[:12]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ForgeIssue)
class ForgeIssueAdmin(admin.ModelAdmin):
    """Each confirmed regression's issue on the forge, with what was sent and the last error."""

    list_display = ["change_point", "watch", "number", "state", "attempts", "last_error", "updated_at"]
    list_filter = ["provider", "state"]
    search_fields = ["watch__repo_key", "url", "last_error"]
    list_select_related = ["change_point", "watch"]
    readonly_fields = [f.name for f in ForgeIssue._meta.get_fields() if f.concrete]

    def has_add_permission(self, request):
        return False  # opened by the service for confirmed regressions
