# Each kept spec's settings digest (what in it can move a figure): runs of other settings are
# other series. Rows kept before get theirs computed from their spec.

from django.db import migrations, models

from runners.contract import settings_digest


def fill_settings(apps, schema_editor):
    KeptSpec = apps.get_model("bench", "KeptSpec")
    for row in KeptSpec.objects.filter(settings="").only("id", "spec").iterator():
        KeptSpec.objects.filter(id=row.id).update(settings=settings_digest(row.spec))


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0025_home_version'),
    ]

    operations = [
        migrations.AddField(
            model_name='keptspec',
            name='settings',
            field=models.CharField(db_index=True, default='', help_text='The sha256 of what in the spec can move a figure (jobspec.settings_digest): runs of other settings are other series.', max_length=64),
        ),
        migrations.AlterField(
            model_name='benchmark',
            name='packages',
            field=models.JSONField(blank=True, default=list, help_text='Extra packages the engine needs, e.g. ["vllm-gguf-plugin==0.0.5", "gguf==0.19.0"]: the worker installs them from its wheelhouse (BENCH_WHEELHOUSE), without their dependencies.'),
        ),
        migrations.RunPython(fill_settings, migrations.RunPython.noop),
    ]
