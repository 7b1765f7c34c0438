"""Run counts kept by database triggers (run_count_sql.py), filled from the runs there are.

On PostgreSQL this runs in one transaction: CREATE TRIGGER locks bench_run against writes until
the fill (one pass over the runs: about a second per million) commits, so no write is missed."""
from django.db import migrations, models

from benchsite.metrics import run_count_sql


def create_triggers(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for sql in [*run_count_sql.statements(schema_editor.connection.vendor, create=True), *run_count_sql.RECOUNT]:
            cursor.execute(sql)


def drop_triggers(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for sql in run_count_sql.statements(schema_editor.connection.vendor, create=False):
            cursor.execute(sql)


class Migration(migrations.Migration):
    initial = True
    dependencies = [("bench", "0026_kept_spec_settings")]

    operations = [
        migrations.CreateModel(
            name="RunCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("benchmark_id", models.BigIntegerField()),
                ("state", models.CharField(max_length=10)),
                ("trigger", models.CharField(max_length=10)),
                ("n", models.BigIntegerField(default=0)),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("benchmark_id", "state", "trigger"),
                                                             name="run_count_key")]},
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
