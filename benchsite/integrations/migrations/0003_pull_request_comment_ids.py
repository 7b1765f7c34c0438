# Pull requests remember the one PR comment (GitHub) and merge-request note (GitLab) kept up to date.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('hooks', '0002_pull_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='pullrequest',
            name='comment_id',
            field=models.CharField(blank=True, help_text='GitHub: the one PR comment kept up to date.', max_length=40),
        ),
        migrations.AddField(
            model_name='pullrequest',
            name='note_id',
            field=models.CharField(blank=True, help_text='GitLab: the one MR note kept up to date.', max_length=40),
        ),
    ]
