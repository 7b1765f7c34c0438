from django.contrib import admin

from benchsite.bench.admin_lists import LargeTableAdmin, MetricListFilter

from .models import Alert, ChangePoint, HostHealth, Subscription, Threshold, Verdict


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("benchmark", "name", "kind", "webhook_url", "email", "active")
    list_filter = ("benchmark", "kind", "active")
    fields = ("benchmark", "name", "kind", "webhook_url", "email", "secret", "active")


@admin.register(Threshold)
class ThresholdAdmin(admin.ModelAdmin):
    list_display = ("metric", "benchmark", "relative")


@admin.register(ChangePoint)
class ChangePointAdmin(admin.ModelAdmin):
    list_display = ("series_key", "metric", "commit", "change", "status", "confirmation", "created_at")
    list_filter = ("status", "confirmation", "metric")
    raw_id_fields = ("run", "previous_run", "confirm_run")


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("change_point", "subscription", "state", "attempts", "sent_at")
    list_filter = ("state",)


@admin.register(Verdict)
class VerdictAdmin(LargeTableAdmin):
    list_display = ("run", "metric", "kind", "effect", "threshold")
    list_filter = ("kind", MetricListFilter)
    list_select_related = ("run__variant",)  # a run's name says its variant
    ordering = ("-id",)  # newest first, on the primary key: the model's metric order sorts every row
    raw_id_fields = ("run",)


@admin.register(HostHealth)
class HostHealthAdmin(admin.ModelAdmin):
    list_display = ("hostname", "measured_at", "backend", "world_size", "bytes", "allreduce_us", "drift", "flagged")
    list_filter = ("flagged", "hostname")
