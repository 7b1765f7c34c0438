# Runs finished before judgements were recorded: judged when they finished, unless a succeeded
# run of the series (not a bisection step or canary run) has no verdict: then its page says so.
from django.db import migrations
from django.db.models import F

MISSING = "verdicts: none were stored when it finished (a retried result could skip them)"


def mark_judged(apps, schema_editor):
    Run = apps.get_model("bench", "Run")
    finished = Run.objects.filter(state__in=["SUCCEEDED", "FAILED"], judged_at__isnull=True)
    unjudged = set(finished.filter(state="SUCCEEDED", verdicts__isnull=True, bisect_steps__isnull=True,
                                    canary_run__isnull=True, measurements__metric="decode_tok_s")
                    .values_list("id", flat=True))
    Run.objects.filter(id__in=unjudged).update(judgement_missing=MISSING)
    finished.exclude(id__in=unjudged).update(judged_at=F("finished_at"))


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0017_robust_run_judgement'),
        ('regressions', '0008_outcome_runs'),
    ]

    operations = [
        migrations.RunPython(mark_judged, migrations.RunPython.noop),
    ]
