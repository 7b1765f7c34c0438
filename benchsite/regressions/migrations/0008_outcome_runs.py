# Every existing run gets the outcome its correctness, verdicts and change points decide.
from django.db import migrations

BATCH = 500


def compute_outcomes(apps, schema_editor):
    from benchsite.bench.lifecycle.outcome import run_outcome
    from benchsite.regressions.outcomes import run_facts

    Run = apps.get_model("bench", "Run")
    changed = []
    for run in Run.objects.order_by("id").iterator(chunk_size=BATCH):
        run.outcome, run.outcome_final = run_outcome(run_facts(run))
        changed.append(run)
        if len(changed) == BATCH:
            Run.objects.bulk_update(changed, ["outcome", "outcome_final"])
            changed = []
    Run.objects.bulk_update(changed, ["outcome", "outcome_final"])


class Migration(migrations.Migration):

    dependencies = [
        ("bench", "0013_outcome_run_outcome"),
        ("regressions", "0007_changepoint_confirm_attempts"),
    ]

    operations = [
        migrations.RunPython(compute_outcomes, migrations.RunPython.noop),
    ]
