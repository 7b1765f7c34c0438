import fnmatch
import re

from django.db import migrations, models

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
CHUNK = 500


def _branch_of_ref(ref: str, main_line: str, patterns: list[str]) -> str:
    """A ref known to be a branch without git: none (the default ref ran), the main line's name,
    or a name one of the repository's watches measures. A commit or anything else: no branch."""
    name = ref.removeprefix("refs/heads/")
    if not name:
        return main_line
    if FULL_SHA.match(name):
        return ""
    return name if name == main_line or any(fnmatch.fnmatchcase(name, p) for p in patterns) else ""


def give_runs_their_branch(apps, schema_editor):
    """Runs of git benchmarks get the branch that is known: a push's for webhook runs, the ref's
    when it names the main line or a watched branch (an empty ref ran the default one), and a
    scheduled re-run at a commit the branch of an earlier run at that commit. Runs of the
    installed engine have no branch (their benchmark has one line)."""
    Run = apps.get_model("bench", "Run")
    Benchmark = apps.get_model("bench", "Benchmark")
    Delivery = apps.get_model("hooks", "WebhookDelivery")
    Watch = apps.get_model("hooks", "RepoWatch")
    pushed = dict(Delivery.runs.through.objects.values_list("run_id", "webhookdelivery__branch"))
    patterns: dict[int, list[str]] = {}
    for benchmark_id, branches in Watch.benchmarks.through.objects.values_list("benchmark_id", "repowatch__branches"):
        patterns.setdefault(benchmark_id, []).extend(p for p in branches or [] if isinstance(p, str))
    given: dict[str, list[int]] = {}
    for benchmark in Benchmark.objects.filter(engine_source__kind="git").select_related("engine_source"):
        main_line = benchmark.engine_source.default_ref or "main"
        by_commit: dict[str, str] = {}
        rescheduled = []
        runs = Run.objects.filter(benchmark=benchmark).order_by("created_at", "id")
        for run_id, trigger, ref, commit in runs.values_list("id", "trigger", "ref", "commit"):
            if trigger == "schedule":
                rescheduled.append((run_id, commit))
                continue
            if trigger == "webhook":
                branch = pushed.get(run_id) or ("" if FULL_SHA.match(ref) else ref.removeprefix("refs/heads/"))
            else:
                branch = _branch_of_ref(ref, main_line, patterns.get(benchmark.id, []))
            if branch:
                given.setdefault(branch, []).append(run_id)
                if commit:
                    by_commit.setdefault(commit, branch)
        for run_id, commit in rescheduled:
            if by_commit.get(commit):
                given.setdefault(by_commit[commit], []).append(run_id)
    for branch, ids in given.items():
        for i in range(0, len(ids), CHUNK):
            Run.objects.filter(id__in=ids[i:i + CHUNK]).update(branch=branch[:250])


class Migration(migrations.Migration):

    # One line of bench migrations, no parallel leaves: unapplying a branch of the graph on SQLite
    # rebuilds bench_run from the state of every migration the full plan put before it, so going
    # back (e.g. to 0008) would bring back the later columns of the other branches, NOT NULL.
    dependencies = [
        ('bench', '0015_merge_20261201_1517'),
        ('hooks', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='build',
            name='first_parent_depth',
            field=models.PositiveIntegerField(blank=True, help_text='Commits on its first-parent history: orders a branch.', null=True),
        ),
        migrations.AddField(
            model_name='build',
            name='parent_commit',
            field=models.CharField(blank=True, help_text="The commit's first parent, as git says.", max_length=64),
        ),
        migrations.AddField(
            model_name='run',
            name='branch',
            field=models.CharField(blank=True, db_index=True, help_text="The branch it belongs to: a push's, or a branch ref the worker resolved; empty: none (a commit or tag, the installed engine).", max_length=250),
        ),
        migrations.RunPython(give_runs_their_branch, migrations.RunPython.noop),
    ]
