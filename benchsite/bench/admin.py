from django.contrib import admin

from .admin_lists import LargeTableAdmin, MetricListFilter
from .models import Artifact, Benchmark, Build, EngineSource, Measurement, Patch, Run, Variant
from .domain import home_cache


@admin.register(EngineSource)
class EngineSourceAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "repo_url", "default_ref"]
    list_filter = ["kind"]
    search_fields = ["name", "repo_url"]


@admin.register(Patch)
class PatchAdmin(admin.ModelAdmin):
    list_display = ["name", "short_sha", "created_at"]
    search_fields = ["name", "sha256"]
    readonly_fields = ["sha256", "created_at"]

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "content":
            kwargs["strip"] = False  # a diff's last newline is part of it (git apply needs it)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        """A patch a run was triggered with or a build applied is what ran: its content stays (a
        changed diff is a new patch)."""
        if obj is not None and (obj.run_set.exists() or obj.build_set.exists()):
            return [*self.readonly_fields, "name", "content"]
        return self.readonly_fields

    @admin.display(description="sha256")
    def short_sha(self, obj):
        return obj.sha256[:12]


@admin.register(Build)
class BuildAdmin(admin.ModelAdmin):
    list_display = ["id", "source", "commit", "engine_version", "cache_key", "created_at"]
    list_filter = ["source"]
    search_fields = ["commit", "cache_key", "engine_version"]
    filter_horizontal = ["patches"]
    readonly_fields = ["created_at"]


class VariantInline(admin.TabularInline):
    model = Variant
    extra = 0
    fields = ["position", "name", "flags", "env", "is_reference"]
    ordering = ["position"]


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "model", "tensor_parallel_size", "gpu_pool", "max_tokens", "repeats", "created_at"]
    list_filter = ["gpu_pool", "tensor_parallel_size"]
    search_fields = ["name", "slug", "model"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [VariantInline]


@admin.register(Variant)
class VariantAdmin(admin.ModelAdmin):
    list_display = ["benchmark", "position", "name", "flags", "env", "is_reference"]
    list_filter = ["benchmark", "is_reference"]
    search_fields = ["name", "benchmark__name"]
    filter_horizontal = ["patches"]
    ordering = ["benchmark", "position"]


class MeasurementInline(admin.TabularInline):
    model = Measurement
    extra = 0
    fields = ["metric", "point", "value", "unit", "direction", "ci_low", "ci_high", "samples"]

    def get_queryset(self, request):  # every workload point, not only the first
        return Measurement.all_points.all()


class ArtifactInline(admin.TabularInline):
    model = Artifact
    extra = 0
    fields = ["kind", "name", "size", "sha256", "error", "created_at", "removed_at", "removed_reason"]
    readonly_fields = ["size", "sha256", "error", "created_at", "removed_at", "removed_reason"]
    show_change_link = True


@admin.register(Run)
class RunAdmin(LargeTableAdmin):
    list_display = ["id", "benchmark", "variant", "state", "outcome", "phase", "commit", "trigger", "worker_host", "created_at", "finished_at"]
    # No filter by worker host and no date hierarchy: their choices would be a SELECT DISTINCT over
    # every run (0.2 s at 1,000,000); search finds a host, the created_at filter's ranges need no query.
    list_filter = ["state", "outcome", "outcome_final", "trigger", "benchmark", "created_at"]
    search_fields = ["=id", "commit", "task_id", "worker_host", "batch", "error"]
    list_select_related = ["benchmark", "variant__benchmark"]  # the variant's name says its benchmark
    raw_id_fields = ["build", "triggered_by"]
    readonly_fields = ["created_at", "kept_spec"]  # what the run was sent: never edited
    inlines = [MeasurementInline, ArtifactInline]


@admin.register(Measurement)
class MeasurementAdmin(LargeTableAdmin):
    list_display = ["run", "metric", "value", "unit", "direction", "ci_low", "ci_high"]
    list_filter = [MetricListFilter, "direction", "run__benchmark"]
    ordering = ["-id"]  # newest first, on the primary key: the model's (metric, point) order sorts every row
    search_fields = ["metric", "=run__id"]
    list_select_related = ["run", "run__variant"]
    raw_id_fields = ["run"]

    # Measurements send no delete signal (a run's cascade stays one DELETE): the home page's
    # summaries are told here (a run's inline deletions: by the run's own save).
    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        home_cache.note_changes(Run.objects.filter(id=obj.run_id).values_list("benchmark_id", flat=True))

    def delete_queryset(self, request, queryset):
        benchmarks = set(queryset.values_list("run__benchmark_id", flat=True).distinct())
        super().delete_queryset(request, queryset)
        home_cache.note_changes(benchmarks)


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["run", "kind", "name", "size", "error", "created_at", "removed_at"]
    # written by the storage and the retention policy, not by hand
    readonly_fields = ["file", "size", "sha256", "error", "created_at", "removed_at", "removed_reason"]
    list_filter = ["kind", ("removed_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "=run__id"]
    list_select_related = ["run", "run__variant"]
    raw_id_fields = ["run"]

    def changelist_view(self, request, extra_context=None):
        """The list says which files the retention policy frees, and which it keeps (bench_gc)."""
        from .retention.policy import Policy

        extra_context = {**(extra_context or {}), "retention_policy": Policy.from_settings().lines()}
        return super().changelist_view(request, extra_context=extra_context)
