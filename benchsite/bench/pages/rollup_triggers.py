"""The writes that change a chart mark its benchmark's rolled-up series stale and rebuild them once
committed (bench.pages.rollups). Connected in BenchConfig.ready. Bulk writes send no signals:
`manage.py bench_rollup` finds those by the raw data's version."""
from __future__ import annotations

from functools import partial

from django.db import transaction
from django.db.models.signals import post_delete, post_save

from . import rollups
from ..models import Measurement, Run, Variant

# A run's fields the charts read (history._rows); saves of other fields (progress, heartbeats) change no chart.
CHART_RUN_FIELDS = frozenset({"state", "trigger", "commit", "branch", "ref", "build", "variant", "batch", "created_at"})


def note_change(benchmark_id: int | None) -> None:
    if benchmark_id is None:
        return
    rollups.mark_stale(benchmark_id)
    transaction.on_commit(partial(rollups.refresh_after_write, benchmark_id))


def _measurement_saved(sender, instance: Measurement, **kwargs) -> None:
    run = instance._state.fields_cache.get("run")
    if run is not None:
        note_change(run.benchmark_id)
    else:
        note_change(Run.objects.filter(pk=instance.run_id).values_list("benchmark_id", flat=True).first())


def _run_saved(sender, instance: Run, created: bool, update_fields=None, **kwargs) -> None:
    # Only succeeded runs are drawn: a save of another run (progress, heartbeats) changes a chart
    # only when it changes the state (a run leaving SUCCEEDED).
    if update_fields is None:
        changed = instance.state == Run.State.SUCCEEDED
    else:
        changed = "state" in update_fields or (instance.state == Run.State.SUCCEEDED
                                               and bool(CHART_RUN_FIELDS & set(update_fields)))
    if changed:
        note_change(instance.benchmark_id)


def _run_deleted(sender, instance: Run, **kwargs) -> None:
    note_change(instance.benchmark_id)


def _variant_changed(sender, instance: Variant, **kwargs) -> None:
    note_change(instance.benchmark_id)


def connect() -> None:
    post_save.connect(_measurement_saved, sender=Measurement, dispatch_uid="rollup_measurement_saved")
    post_save.connect(_run_saved, sender=Run, dispatch_uid="rollup_run_saved")
    post_delete.connect(_run_deleted, sender=Run, dispatch_uid="rollup_run_deleted")
    post_save.connect(_variant_changed, sender=Variant, dispatch_uid="rollup_variant_saved")
    post_delete.connect(_variant_changed, sender=Variant, dispatch_uid="rollup_variant_deleted")
