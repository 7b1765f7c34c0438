# The retention policy's marks on an artifact (bench/retention/) and the index bench_gc scans
# (partial: the files not removed yet).
# Both columns are nullable or have a constant default: PostgreSQL adds them without rewriting
# the table. The index is built CONCURRENTLY there, so writes to a big artifact table go on
# meanwhile (docs/operations.md "Upgrades"); SQLite builds it the ordinary way.

from django.db import migrations, models

from benchsite.bench.schema_ops import AddIndexConcurrently

INDEX = models.Index(fields=['kind', 'id'], name='artifact_live_kind_idx',
                     condition=models.Q(removed_at__isnull=True))


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ('bench', '0020_series_rollups'),
    ]

    operations = [
        migrations.AddField(
            model_name='artifact',
            name='removed_at',
            field=models.DateTimeField(blank=True, help_text='When the retention policy removed the file.', null=True),
        ),
        migrations.AddField(
            model_name='artifact',
            name='removed_reason',
            field=models.CharField(blank=True, help_text="The policy's rule, e.g. 'traces are kept 30 days'.",
                                   max_length=200),
        ),
        AddIndexConcurrently(model_name='artifact', index=INDEX),
    ]
