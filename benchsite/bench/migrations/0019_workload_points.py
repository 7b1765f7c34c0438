# Benchmarks get workload points; each measurement names its point, existing ones their benchmark's single point.
from django.db import migrations, models


def single_point(apps, schema_editor):
    """The point every run measured before workloads: c1-p0-m<max_tokens> (runners.contract.WorkloadPoint.id
    of a point without prompt_tokens), written out here so the migration does not follow later code."""
    Benchmark, Measurement = apps.get_model("bench", "Benchmark"), apps.get_model("bench", "Measurement")
    for benchmark_id, max_tokens in Benchmark.objects.values_list("id", "max_tokens"):
        Measurement.objects.filter(run__benchmark_id=benchmark_id, point="").update(point=f"c1-p0-m{max_tokens}")


def no_point(apps, schema_editor):
    apps.get_model("bench", "Measurement").objects.update(point="")


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0018_run_merge_base_with'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='measurement',
            options={'ordering': ['metric', 'point']},
        ),
        migrations.RemoveConstraint(
            model_name='measurement',
            name='measurement_metric_unique',
        ),
        migrations.AddField(
            model_name='benchmark',
            name='workloads',
            field=models.JSONField(blank=True, default=list, help_text='Workload points, e.g. [{"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256}]; empty: the single point of max_tokens at concurrency 1 (its id c1-p0-m<max_tokens>).'),
        ),
        migrations.AddField(
            model_name='measurement',
            name='point',
            field=models.CharField(default='', help_text="The workload point's id, e.g. c16-p8192-m256 (runners.contract.WorkloadPoint).", max_length=100),
        ),
        migrations.AddField(
            model_name='measurement',
            name='first_point',
            field=models.BooleanField(default=True, help_text="Of the run's first workload point: its figure where one per run is read (verdicts, charts, comparisons)."),
        ),
        migrations.AddConstraint(
            model_name='measurement',
            constraint=models.UniqueConstraint(fields=('run', 'metric', 'point'), name='measurement_metric_point_unique'),
        ),
        migrations.RunPython(single_point, no_point),
    ]
