"""The signals of the writes that change a benchmark's derived data (the charts' rolled-up series,
the home page's summaries): each connects one watch, which calls its NOTE_CHANGE with the benchmark
of every such write. Writes that send no signal (QuerySet.update, bulk_create, COPY) are each
derived datum's own business."""
from __future__ import annotations

from collections.abc import Callable

from django.db.models.signals import post_delete, post_save

from ..models import Measurement, Run, Variant


def connect_watch(note_change: Callable[[int | None], None], *, name: str, run_fields: frozenset[str],
                  metrics: frozenset[str] | None = None) -> None:
    """NOTE_CHANGE(benchmark id) after: a measurement saved (of METRICS only, when given); a run
    created succeeded, saved into or out of SUCCEEDED, or a succeeded run's RUN_FIELDS saved (a full
    save, as the admin's: its state before is unknown, so always); a run deleted; a variant saved or
    deleted. Saves of other fields (progress, heartbeats) are not changes."""

    def measurement_saved(sender, instance: Measurement, **kwargs) -> None:
        if metrics is not None and instance.metric not in metrics:
            return
        run = instance._state.fields_cache.get("run")
        note_change(run.benchmark_id if run is not None else
                    Run.objects.filter(pk=instance.run_id).values_list("benchmark_id", flat=True).first())

    def run_saved(sender, instance: Run, created: bool, update_fields=None, **kwargs) -> None:
        if created:
            changed = instance.state == Run.State.SUCCEEDED
        elif update_fields is None:
            changed = True
        else:
            changed = "state" in update_fields or (instance.state == Run.State.SUCCEEDED
                                                   and bool(run_fields & set(update_fields)))
        if changed:
            note_change(instance.benchmark_id)

    def benchmark_written(sender, instance, **kwargs) -> None:
        note_change(instance.benchmark_id)

    post_save.connect(measurement_saved, sender=Measurement, weak=False, dispatch_uid=f"{name}_measurement_saved")
    post_save.connect(run_saved, sender=Run, weak=False, dispatch_uid=f"{name}_run_saved")
    post_delete.connect(benchmark_written, sender=Run, weak=False, dispatch_uid=f"{name}_run_deleted")
    post_save.connect(benchmark_written, sender=Variant, weak=False, dispatch_uid=f"{name}_variant_saved")
    post_delete.connect(benchmark_written, sender=Variant, weak=False, dispatch_uid=f"{name}_variant_deleted")
