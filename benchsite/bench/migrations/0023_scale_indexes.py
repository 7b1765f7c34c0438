# Indexes for a million runs on PostgreSQL (docs/methods/service-load.md): commit-prefix
# lookups (the commit and runs APIs) by an index rather than a scan of every run, built
# without blocking writes; the measurement's own run index dropped, the unique
# (run, metric, point) index serving the same lookups.

import django.db.models.deletion
from django.db import migrations, models

from benchsite.bench.schema_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ('bench', '0022_artifact_retention'),
    ]

    operations = [
        migrations.AlterField(
            model_name='measurement',
            name='run',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='measurements', to='bench.run'),
        ),
        AddIndexConcurrently(
            model_name='run',
            index=models.Index(fields=['commit'], name='run_commit_prefix_idx', opclasses=['varchar_pattern_ops']),
        ),
    ]
