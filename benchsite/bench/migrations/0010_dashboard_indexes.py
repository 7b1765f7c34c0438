# Indexes for the dashboard's newest-first and one-metric reads, and Measurement.updated_at
# that versions its cached charts.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0009_artifact_storage'),
    ]

    operations = [
        migrations.AddField(
            model_name='measurement',
            name='updated_at',
            field=models.DateTimeField(auto_now=True, db_index=True),
        ),
        migrations.AddIndex(
            model_name='measurement',
            index=models.Index(fields=['metric', 'run'], name='measurement_metric_run_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['variant', 'created_at', 'id'], name='run_variant_created_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['benchmark', 'created_at', 'id'], name='run_benchmark_created_idx'),
        ),
    ]
