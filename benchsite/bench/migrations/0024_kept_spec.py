# The job spec a run was triggered with, kept: the benchmark's and variant's part once per
# distinct content (KeptSpec), each run pointing at its row. Runs from before have none (their
# page rebuilds the spec). The run table's index is built without blocking writes.

import django.db.models.deletion
from django.db import migrations, models

from benchsite.bench.schema_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ('bench', '0023_scale_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='KeptSpec',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('sha256', models.CharField(max_length=64, unique=True)),
                ('spec', models.JSONField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name='run',
            name='kept_spec',
            field=models.ForeignKey(blank=True, db_index=False, help_text="The benchmark's and variant's part of the job spec it was triggered with; empty: a run from before specs were kept (its page rebuilds the spec from the benchmark as it is now).", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='bench.keptspec'),
        ),
        AddIndexConcurrently(
            model_name='run',
            index=models.Index(fields=['kept_spec'], name='run_kept_spec_idx'),
        ),
    ]
