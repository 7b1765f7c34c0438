"""Old rows made consistent with what the pages now show:

- `ceiling_tok_s` follows the run's headline share (the profiler's `allreduce_share`, else the
  analytic one), with every method's ceiling kept in its details (`by_method`), as
  runners.analysis.share.headline_ceiling stores it; results of older runners followed another.
- An imported run was created at import time, after it had finished: it gets the time it was
  measured (started, else finished) as its creation time, and its heartbeat is no later than its
  end.

The arithmetic is written out here (a migration stays what it was when it ran)."""
from django.db import migrations
from django.db.models import F

SHARES = (("profiler", "allreduce_share"), ("analytic", "allreduce_share_analytic"))


def _headline(values: dict) -> dict | None:
    tok_s = values.get("decode_tok_s")
    if not tok_s:
        return None
    by_method = {method: tok_s / (1.0 - values[metric]) for method, metric in SHARES
                 if values.get(metric) is not None and 0.0 <= values[metric] < 1.0}
    if not by_method:
        return None
    method = "profiler" if "profiler" in by_method else "analytic"
    share = values["allreduce_share" if method == "profiler" else "allreduce_share_analytic"]
    return {"tok_s": by_method[method], "from": method, "share": share,
            "meaning": f"decode tok/s if allreduce were free, from the {method} share (allreduce_share's headline)",
            "by_method": by_method}


def recompute_ceilings(apps, schema_editor):
    Measurement = apps.get_model("bench", "Measurement")
    wanted = ["decode_tok_s", "allreduce_share", "allreduce_share_analytic"]
    for ceiling in Measurement.objects.filter(metric="ceiling_tok_s").iterator():
        values = dict(Measurement.objects.filter(run_id=ceiling.run_id, metric__in=wanted).values_list("metric", "value"))
        headline = _headline(values)
        if headline is None:
            continue
        same = abs(ceiling.value - headline["tok_s"]) < 1e-9 and (ceiling.details or {}).get("from") == headline["from"]
        if not same:
            ceiling.value, ceiling.details = headline["tok_s"], {**(ceiling.details or {}), **headline}
            ceiling.save(update_fields=["value", "details"])


def imported_runs_at_their_time(apps, schema_editor):
    Run = apps.get_model("bench", "Run")
    imported = Run.objects.filter(trigger="import")
    imported.filter(started_at__isnull=False, started_at__lt=F("created_at")).update(created_at=F("started_at"))
    imported.filter(started_at__isnull=True, finished_at__isnull=False, finished_at__lt=F("created_at")).update(
        created_at=F("finished_at"))
    imported.filter(finished_at__isnull=False, heartbeat_at__gt=F("finished_at")).update(heartbeat_at=F("finished_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("bench", "0011_run_repeats"),
    ]

    operations = [
        migrations.RunPython(recompute_ceilings, migrations.RunPython.noop),
        migrations.RunPython(imported_runs_at_their_time, migrations.RunPython.noop),
    ]
