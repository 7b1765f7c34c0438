# The retention policy's marks on an artifact (bench/retention/) and the index bench_gc scans
# (partial: the files not removed yet).
# Both columns are nullable or have a constant default: PostgreSQL adds them without rewriting
# the table. The index is built CONCURRENTLY there, so writes to a big artifact table go on
# meanwhile (docs/operations.md "Upgrades"); SQLite builds it the ordinary way.

from django.db import migrations, models

INDEX = models.Index(fields=['kind', 'id'], name='artifact_live_kind_idx',
                     condition=models.Q(removed_at__isnull=True))


def add_index(apps, schema_editor):
    model = apps.get_model('bench', 'Artifact')
    if schema_editor.connection.vendor == 'postgresql':
        table = schema_editor.quote_name(model._meta.db_table)
        schema_editor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX.name} ON {table} '
                              '("kind", "id") WHERE "removed_at" IS NULL')
    else:
        schema_editor.add_index(model, INDEX)


def drop_index(apps, schema_editor):
    model = apps.get_model('bench', 'Artifact')
    if schema_editor.connection.vendor == 'postgresql':
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS {INDEX.name}')
    else:
        schema_editor.remove_index(model, INDEX)


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
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name='artifact', index=INDEX)],
            database_operations=[migrations.RunPython(add_index, drop_index)],
        ),
    ]
