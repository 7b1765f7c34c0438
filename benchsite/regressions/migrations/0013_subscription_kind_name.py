from django.db import migrations, models


def kind_from_target(apps, schema_editor):
    """Existing subscriptions: `email` where they have an address, else the signed webhook (the default)."""
    Subscription = apps.get_model("regressions", "Subscription")
    Subscription.objects.exclude(email="").update(kind="email")


class Migration(migrations.Migration):

    dependencies = [
        ('regressions', '0012_changepoint_confirm_figures'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='subscription',
            name='subscription_one_target',
        ),
        migrations.AddField(
            model_name='subscription',
            name='kind',
            field=models.CharField(choices=[('webhook', 'signed JSON webhook'), ('email', 'email'), ('slack', 'Slack-format incoming webhook')], default='webhook', max_length=10),
        ),
        migrations.AddField(
            model_name='subscription',
            name='name',
            field=models.CharField(blank=True, help_text='Its name in the benchmarks-as-code file (bench_apply); empty: made in the admin.', max_length=100),
        ),
        migrations.AlterField(
            model_name='subscription',
            name='webhook_url',
            field=models.URLField(blank=True, help_text='The URL of a webhook or Slack subscription.', max_length=500),
        ),
        migrations.RunPython(kind_from_target, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='subscription',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'email'), ('webhook_url', ''), models.Q(('email', ''), _negated=True)), models.Q(('kind__in', ['webhook', 'slack']), models.Q(('webhook_url', ''), _negated=True), ('email', '')), _connector='OR'), name='subscription_one_target'),
        ),
        migrations.AddConstraint(
            model_name='subscription',
            constraint=models.UniqueConstraint(condition=models.Q(('name', ''), _negated=True), fields=('name', 'benchmark'), name='subscription_name_once_per_benchmark'),
        ),
    ]
