# A trigger's per-run repeats override (the trigger form); empty: the benchmark's repeats.
import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0010_dashboard_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='repeats',
            field=models.PositiveSmallIntegerField(blank=True, help_text="Timed repeats asked for at the trigger; empty: the benchmark's.", null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(50)]),
        ),
    ]
