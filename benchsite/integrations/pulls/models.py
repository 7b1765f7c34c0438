"""Pull requests, their comparisons (one per head and benchmark), the runs of each side, and
the record of who asked for what."""
from django.db import models


class PullRequest(models.Model):
    """A GitHub pull request or GitLab merge request of a watched repository, as last delivered."""

    class State(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"
        MERGED = "merged"

    watch = models.ForeignKey("hooks.RepoWatch", on_delete=models.CASCADE, related_name="pulls")
    provider = models.CharField(max_length=10)  # github, gitlab
    repo_key = models.CharField(max_length=300, help_text="The service's repository key, host included.")
    number = models.PositiveIntegerField(help_text="GitHub's PR number, GitLab's merge-request iid.")
    title = models.CharField(max_length=300, blank=True)
    author = models.CharField(max_length=100, blank=True)
    url = models.CharField(max_length=500, blank=True)
    base_branch = models.CharField(max_length=250)
    head_branch = models.CharField(max_length=250, blank=True)
    head_sha = models.CharField(max_length=64)
    head_repo = models.CharField(max_length=300, blank=True, help_text="Where the head lives (a fork's key).")
    is_fork = models.BooleanField(default=False)
    draft = models.BooleanField(default=False)
    labels = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    comment_id = models.CharField(max_length=40, blank=True, help_text="GitHub: the one PR comment kept up to date.")
    note_id = models.CharField(max_length=40, blank=True, help_text="GitLab: the one MR note kept up to date.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["repo_key", "-number"]
        constraints = [models.UniqueConstraint(fields=["repo_key", "number"], name="pull_request_once")]

    def __str__(self):
        return f"{self.repo_key}#{self.number}"

    @property
    def repo_name(self) -> str:
        """The repository as its watch's URL spells it (read with the watch: select_related)."""
        return self.watch.repo_name


class Comparison(models.Model):
    """One benchmark's A/B of one PR head against its merge base: interleaved runs of both sides
    on one host, judged together once all are final."""

    class State(models.TextChoices):
        WAITING = "waiting", "waiting for a maintainer"
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    pull = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="comparisons")
    benchmark = models.ForeignKey("bench.Benchmark", on_delete=models.CASCADE, related_name="comparisons")
    head_sha = models.CharField(max_length=64)
    base_branch = models.CharField(max_length=250)
    base_tip = models.CharField(max_length=64, blank=True, help_text="The base branch's tip when it was asked for.")
    merge_base = models.CharField(max_length=64, blank=True, help_text="What the base runs measured (the worker resolves it).")
    starts_per_side = models.PositiveSmallIntegerField(default=2, help_text="Engine starts a side it began with.")
    max_starts_per_side = models.PositiveSmallIntegerField(
        default=2, help_text="The most starts a side it may add up to while undecided.")
    rounds = models.PositiveSmallIntegerField(default=0, help_text="Starts a side queued so far (base, head each).")
    host = models.CharField(max_length=200, blank=True, help_text="The worker host both sides were sent to.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    outcome = models.CharField(max_length=12, blank=True, help_text="In the words of a run's outcome; '' until done.")
    summary = models.TextField(blank=True, help_text="One line: why this outcome.")
    table = models.JSONField(default=list, blank=True, help_text="One row per variant (comparison.py).")
    requested_by = models.CharField(max_length=200, blank=True)
    check_run_id = models.CharField(max_length=40, blank=True)
    accepted_by = models.CharField(max_length=100, blank=True,
                                   help_text="Who marked its slowdown as intended (the check run's Accept).")
    accepted_at = models.DateTimeField(null=True, blank=True)
    reported = models.JSONField(default=dict, blank=True, help_text="What was last sent back, per channel.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["pull", "benchmark", "created_at"], name="comparison_pull_idx")]

    def __str__(self):
        return f"{self.pull} {self.benchmark.slug} @ {self.head_sha[:12]}"

    @property
    def check_name(self) -> str:
        return f"decode-bench/{self.benchmark.slug}"


class PullRun(models.Model):
    """A run of one side of a comparison. Such runs never enter a branch's history."""

    class Role(models.TextChoices):
        HEAD = "head"
        BASE = "base"

    run = models.OneToOneField("bench.Run", on_delete=models.CASCADE, related_name="pull_run")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="pull_runs")
    role = models.CharField(max_length=4, choices=Role.choices)
    round = models.PositiveSmallIntegerField(default=1)

    class Meta:
        ordering = ["run_id"]

    def __str__(self):
        return f"run {self.run_id}: {self.role} of {self.comparison_id}"


class PullAction(models.Model):
    """Who asked for what on a PR: an approval (label), a forced run (/bench, Re-run), a refusal."""

    pull = models.ForeignKey(PullRequest, on_delete=models.CASCADE, related_name="actions")
    head_sha = models.CharField(max_length=64, blank=True)
    kind = models.CharField(max_length=20)  # label, /bench, rerequested, closed, ...
    actor = models.CharField(max_length=100, blank=True)
    association = models.CharField(max_length=30, blank=True, help_text="GitHub's author_association.")
    accepted = models.BooleanField(default=False)
    detail = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.pull} {self.kind} by {self.actor or '?'}: {'accepted' if self.accepted else 'refused'}"
