# Verdicts and change points name their workload point (empty: the run's first point); a run has a verdict per metric and point.
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0019_workload_points'),
        ('regressions', '0009_robust_judged_runs'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='verdict',
            name='verdict_run_metric_unique',
        ),
        migrations.AddField(
            model_name='changepoint',
            name='point',
            field=models.CharField(blank=True, help_text="The workload point's id; empty: the runs' first point.", max_length=100),
        ),
        migrations.AddField(
            model_name='verdict',
            name='point',
            field=models.CharField(blank=True, help_text="The workload point's id; empty: the run's first point (the series every run had before workload points).", max_length=100),
        ),
        migrations.AddConstraint(
            model_name='verdict',
            constraint=models.UniqueConstraint(fields=('run', 'metric', 'point'), name='verdict_run_metric_point_unique'),
        ),
    ]
