# A run may measure the merge base of its ref and a branch (the base side of a pull request).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0017_robust_run_judgement'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='merge_base_with',
            field=models.CharField(blank=True, help_text='A branch: the run measures the merge base of `ref` and it (the worker resolves it; the base side of a pull request).', max_length=250),
        ),
        migrations.AlterField(
            model_name='run',
            name='trigger',
            field=models.CharField(choices=[('form', 'Form'), ('webhook', 'Webhook'), ('api', 'Api'), ('schedule', 'Schedule'), ('import', 'Import'), ('cli', 'Cli'), ('pull', 'Pull')], default='form', max_length=10),
        ),
    ]
