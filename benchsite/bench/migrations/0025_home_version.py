# The home page's per-benchmark cache: a version per benchmark that every write changing its
# summaries renews (bench/domain/home_cache.py). Rows are made by the first such write.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0024_kept_spec'),
    ]

    operations = [
        migrations.CreateModel(
            name='HomeVersion',
            fields=[
                ('benchmark', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='home_version', serialize=False, to='bench.benchmark')),
                ('version', models.BigIntegerField()),
            ],
        ),
    ]
