# Pull-request checks: pull requests, their comparisons, the runs of each side, the actions on them.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bench', '0018_run_merge_base_with'),
        ('hooks', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='repowatch',
            name='pull_requests',
            field=models.JSONField(blank=True, default=dict, help_text='Pull-request checks: {"drafts": false, "label": null, "starts_per_side": 2, "comment": false}; false turns them off.'),
        ),
        migrations.CreateModel(
            name='PullRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(max_length=10)),
                ('repo_key', models.CharField(help_text="The service's repository key, host included.", max_length=300)),
                ('number', models.PositiveIntegerField(help_text="GitHub's PR number, GitLab's merge-request iid.")),
                ('title', models.CharField(blank=True, max_length=300)),
                ('author', models.CharField(blank=True, max_length=100)),
                ('url', models.CharField(blank=True, max_length=500)),
                ('base_branch', models.CharField(max_length=250)),
                ('head_branch', models.CharField(blank=True, max_length=250)),
                ('head_sha', models.CharField(max_length=64)),
                ('head_repo', models.CharField(blank=True, help_text="Where the head lives (a fork's key).", max_length=300)),
                ('is_fork', models.BooleanField(default=False)),
                ('draft', models.BooleanField(default=False)),
                ('labels', models.JSONField(blank=True, default=list)),
                ('state', models.CharField(choices=[('open', 'Open'), ('closed', 'Closed'), ('merged', 'Merged')], default='open', max_length=10)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('watch', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pulls', to='hooks.repowatch')),
            ],
            options={
                'ordering': ['repo_key', '-number'],
            },
        ),
        migrations.CreateModel(
            name='PullAction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('head_sha', models.CharField(blank=True, max_length=64)),
                ('kind', models.CharField(max_length=20)),
                ('actor', models.CharField(blank=True, max_length=100)),
                ('association', models.CharField(blank=True, help_text="GitHub's author_association.", max_length=30)),
                ('accepted', models.BooleanField(default=False)),
                ('detail', models.TextField(blank=True)),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('pull', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='actions', to='hooks.pullrequest')),
            ],
            options={
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='Comparison',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('head_sha', models.CharField(max_length=64)),
                ('base_branch', models.CharField(max_length=250)),
                ('base_tip', models.CharField(blank=True, help_text="The base branch's tip when it was asked for.", max_length=64)),
                ('merge_base', models.CharField(blank=True, help_text='What the base runs measured (the worker resolves it).', max_length=64)),
                ('starts_per_side', models.PositiveSmallIntegerField(default=2)),
                ('host', models.CharField(blank=True, help_text='The worker host both sides were sent to.', max_length=200)),
                ('state', models.CharField(choices=[('waiting', 'waiting for a maintainer'), ('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=10)),
                ('outcome', models.CharField(blank=True, help_text="In the words of a run's outcome; '' until done.", max_length=12)),
                ('summary', models.TextField(blank=True, help_text='One line: why this outcome.')),
                ('table', models.JSONField(blank=True, default=list, help_text='One row per variant (comparison.py).')),
                ('requested_by', models.CharField(blank=True, max_length=200)),
                ('check_run_id', models.CharField(blank=True, max_length=40)),
                ('reported', models.JSONField(blank=True, default=dict, help_text='What was last sent back, per channel.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('benchmark', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='comparisons', to='bench.benchmark')),
                ('pull', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='comparisons', to='hooks.pullrequest')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='PullRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('head', 'Head'), ('base', 'Base')], max_length=4)),
                ('round', models.PositiveSmallIntegerField(default=1)),
                ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pull_runs', to='hooks.comparison')),
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='pull_run', to='bench.run')),
            ],
            options={
                'ordering': ['run_id'],
            },
        ),
        migrations.AddConstraint(
            model_name='pullrequest',
            constraint=models.UniqueConstraint(fields=('repo_key', 'number'), name='pull_request_once'),
        ),
        migrations.AddIndex(
            model_name='comparison',
            index=models.Index(fields=['pull', 'benchmark', 'created_at'], name='comparison_pull_idx'),
        ),
    ]
