"""Verdicts on finished runs, change points in each series, who is told about them, and what was sent.

A series is one benchmark + variant + GPU pool + host fingerprint, for one metric: runs on
another host or pool are never silently compared."""
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from runners import contract

from .detect import sensitivity

from benchsite.bench.models import Benchmark, Run, Variant


def validate_relative(value):
    """A threshold's relative change lies above 0 and below 1 (the message says why not)."""
    try:
        contract.check_relative(value, "the threshold")
    except contract.ContractError as exc:
        raise ValidationError(str(exc)) from None


class Threshold(models.Model):
    """The smallest relative change worth a verdict or an alert. A row without a benchmark
    overrides the code default for every benchmark; a benchmark's own row wins over both."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, null=True, blank=True,
                                  related_name="regression_thresholds")
    metric = models.CharField(max_length=100)
    relative = models.FloatField(validators=[validate_relative], help_text="0.03 = 3%; above 0 and below 1")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["benchmark", "metric"], name="threshold_unique")]

    def clean(self):
        try:
            contract.check_judged_metric(self.metric, "metric")
        except contract.ContractError as exc:
            raise ValidationError({"metric": str(exc)}) from None

    def __str__(self):
        return f"{self.benchmark or 'default'} {self.metric} {self.relative:.1%}"


class SeriesNoise(models.Model):
    """The run-to-run noise of one series (series_key, metric, settings digest, measuring method),
    estimated over its newest runs (sensitivity.noise_estimate) each time one of them is judged:
    verdicts, change points, confirmations, bisections and pages read it, never recompute it."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="series_noise")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="series_noise")
    series_key = models.CharField(max_length=300)
    metric = models.CharField(max_length=100)
    point = models.CharField(max_length=100, blank=True)
    settings = models.CharField(max_length=64, blank=True, help_text="KeptSpec.settings; empty: not known.")
    method = models.CharField(max_length=40, blank=True)
    relative = models.FloatField(help_text="Standard deviation of one run's figure over its level.")
    starts = models.PositiveIntegerField(help_text="Engine starts (runs) it was estimated from.")
    same_code = models.PositiveIntegerField(default=0, help_text="Of them, runs of a commit measured more than once.")
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                            help_text="The newest run it read.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["series_key", "metric", "settings", "method"],
                                               name="series_noise_unique")]

    def __str__(self):
        return f"{self.series_key} {self.metric}: {self.relative:.3%} over {self.starts} starts"


class Verdict(models.Model):
    class Kind(models.TextChoices):
        IMPROVEMENT = "improvement"
        REGRESSION = "regression"
        NO_CHANGE = "no_change", "no change"
        NOT_ENOUGH_DATA = "not_enough_data", "not enough data"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="verdicts")
    metric = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    value = models.FloatField(null=True, blank=True, help_text="The run's figure, from clean samples only.")
    baseline = models.FloatField(null=True, blank=True, help_text="Mean of the baseline runs' figures.")
    effect = models.FloatField(null=True, blank=True, help_text="(value - baseline) / baseline")
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    threshold = models.FloatField()
    baseline_runs = models.JSONField(default=list, blank=True)
    baseline_description = models.TextField(blank=True)
    series_key = models.CharField(max_length=300, blank=True)
    point = models.CharField(max_length=100, blank=True, help_text="The workload point's id; empty: the run's first "
                             "point (the series every run had before workload points).")
    note = models.TextField(blank=True)
    strong = models.BooleanField(default=False, help_text="Beyond the 99.9% prediction interval too: a change "
                                                          "point starts at once, before the detector sees it.")
    threshold_source = models.CharField(max_length=10, blank=True, help_text=(
        "Which bound decided the threshold (regressions.sensitivity): explicit, floor, noise or default "
        "(the series' noise not known yet); empty for verdicts from before."))
    noise = models.FloatField(null=True, blank=True, help_text="The series' run-to-run noise (relative) when judged.")
    noise_starts = models.PositiveIntegerField(null=True, blank=True, help_text="The engine starts it was estimated from.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["metric"]
        constraints = [models.UniqueConstraint(fields=["run", "metric", "point"], name="verdict_run_metric_point_unique")]

    def __str__(self):
        return f"run {self.run_id} {self.metric}: {self.kind}"

    @property
    def bound(self) -> sensitivity.Bound | None:
        """The bound it was judged by (None for a verdict from before the rule): its describe()
        says which decided, 'threshold 0.5% (floor); noise 0.08% over 14 starts'."""
        if not self.threshold_source:
            return None
        noise = sensitivity.Noise(self.noise, self.noise_starts or 0) if self.noise is not None else None
        return sensitivity.Bound(self.threshold, self.threshold_source, noise)


class ChangePoint(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        EXPECTED = "expected", "expected (intended trade-off)"
        FALSE_ALARM = "false_alarm", "false alarm"
        CONFIRMED = "confirmed"

    class Confirmation(models.TextChoices):
        NONE = "", "not needed"
        PENDING = "pending"
        AGREED = "agreed"
        DISAGREED = "disagreed"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="change_points")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="change_points")
    series_key = models.CharField(max_length=300, db_index=True)
    metric = models.CharField(max_length=100)
    point = models.CharField(max_length=100, blank=True, help_text="The workload point's id; empty: the runs' first "
                             "point.")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="change_points",
                            help_text="The first run after the change.")
    previous_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                     help_text="The last run before the change.")
    index = models.PositiveIntegerField(help_text="Position of `run` in the series when detected.")
    commit = models.CharField(max_length=64, blank=True)
    previous_commit = models.CharField(max_length=64, blank=True)
    before = models.FloatField()
    after = models.FloatField()
    change = models.FloatField(null=True, blank=True, help_text="(after - before) / before")
    pvalue = models.FloatField(null=True, blank=True)
    is_regression = models.BooleanField(default=False)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN)
    confirmation = models.CharField(max_length=10, choices=Confirmation.choices, blank=True, default="")
    confirm_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    confirm_attempts = models.PositiveSmallIntegerField(
        default=0, help_text="Confirmation runs queued for this change at this commit (a second look after a "
                             "disagreement: judging.SECOND_LOOK_AFTER).")
    confirm_figures = models.JSONField(default=list, blank=True, help_text=(
        "The figures of this confirmation's re-runs so far: one more is queued while they cannot tell "
        "(judging.confirmation_look), up to BENCH_CONFIRM_MAX_RUNS."))
    marked_by = models.CharField(max_length=150, blank=True)
    marked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.series_key} {self.metric} @ {self.commit[:12] or self.run_id}: {self.change or 0:+.1%}"


class Subscription(models.Model):
    """Someone told about a benchmark's confirmed regressions: a signed webhook, a Slack-format
    incoming webhook (Slack, Mattermost, Discord's /slack endpoint) or an email address."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "signed JSON webhook"
        EMAIL = "email", "email"
        SLACK = "slack", "Slack-format incoming webhook"

    URL_KINDS = (Kind.WEBHOOK, Kind.SLACK)

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="regression_subscriptions")
    name = models.CharField(max_length=100, blank=True,
                            help_text="Its name in the benchmarks-as-code file (bench_apply); empty: made in the admin.")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.WEBHOOK)
    webhook_url = models.URLField(max_length=500, blank=True, help_text="The URL of a webhook or Slack subscription.")
    email = models.EmailField(blank=True)
    secret = models.CharField(max_length=200, blank=True,
                              help_text="HMAC key of this webhook's signature; empty: BENCH_ALERT_SECRET.")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(kind="email") & models.Q(webhook_url="") & ~models.Q(email=""))
                | (models.Q(kind__in=["webhook", "slack"]) & ~models.Q(webhook_url="") & models.Q(email="")),
                name="subscription_one_target"),
            models.UniqueConstraint(fields=["name", "benchmark"], condition=~models.Q(name=""),
                                    name="subscription_name_once_per_benchmark"),
        ]

    def __str__(self):
        return f"{self.benchmark}: {self.kind} {self.webhook_url or self.email}"

    def clean(self):
        super().clean()
        if self.kind == self.Kind.EMAIL and (self.webhook_url or not self.email):
            raise ValidationError({"email": "An email subscription has an email address and no URL."})
        if self.kind in self.URL_KINDS and (self.email or not self.webhook_url):
            raise ValidationError({"webhook_url": f"A {self.kind} subscription has a URL and no email address."})


class Alert(models.Model):
    """One notification of one change point to one subscription (unique: never sent twice)."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    change_point = models.ForeignKey(ChangePoint, on_delete=models.CASCADE, related_name="alerts")
    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["change_point", "subscription"], name="alert_once")]

    def __str__(self):
        return f"alert {self.pk} {self.state}"


class Bisection(models.Model):
    """A binary search over the first-parent commits between a good and a bad commit."""

    class State(models.TextChoices):
        RUNNING = "running"
        FOUND = "found"
        UNDECIDABLE = "undecidable"
        FAILED = "failed"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="bisections")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="bisections")
    metric = models.CharField(max_length=100)
    change_point = models.ForeignKey(ChangePoint, on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="bisections")
    branch = models.CharField(max_length=250)
    good_commit = models.CharField(max_length=64)
    bad_commit = models.CharField(max_length=64)
    commits = models.JSONField(default=list, help_text="First-parent commits after good, oldest first, ending with bad.")
    good_level = models.FloatField(null=True, blank=True)
    bad_level = models.FloatField(null=True, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.RUNNING)
    first_bad = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    started_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"bisection {self.pk} {self.good_commit[:10]}..{self.bad_commit[:10]} {self.state}"


class BisectStep(models.Model):
    class Role(models.TextChoices):
        GOOD_END = "good_end", "measure the good end"
        BAD_END = "bad_end", "measure the bad end"
        PROBE = "probe"
        GOOD_AGAIN = "good_again", "re-measure the good side"
        BAD_AGAIN = "bad_again", "re-measure the bad side"

    class Outcome(models.TextChoices):
        PENDING = "pending"
        GOOD = "good"
        BAD = "bad"
        SKIP = "skip"

    bisection = models.ForeignKey(Bisection, on_delete=models.CASCADE, related_name="steps")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.PROBE)
    commit = models.CharField(max_length=64)
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="bisect_steps")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.PENDING)
    value = models.FloatField(null=True, blank=True)
    note = models.CharField(max_length=300, blank=True)
    recheck_of = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="rechecks",
                                   help_text="The probe whose judgement waits for this re-measured end.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]


class Canary(models.Model):
    """A fixed commit and variant re-run on a schedule: a shift in its series is the host or the
    environment, not the code, and verdicts of that host and pool say so."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="canaries")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="canaries")
    commit = models.CharField(max_length=64, blank=True, help_text="Full SHA; empty for the installed engine.")
    every_hours = models.PositiveIntegerField(default=24, validators=[MinValueValidator(1)])
    active = models.BooleanField(default=True)
    last_triggered_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"canary {self.benchmark.slug}/{self.variant.name} @ {self.commit[:10] or 'installed'}"


class CanaryRun(models.Model):
    canary = models.ForeignKey(Canary, on_delete=models.CASCADE, related_name="canary_runs")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="canary_run")


class HostHealth(models.Model):
    """One comm health check of a worker host before a batch (runners/probes/health.py): its allreduce
    latency against the host's own history. A flagged host's runs say so in their verdicts."""

    hostname = models.CharField(max_length=200, db_index=True)
    fingerprint = models.CharField(max_length=300, blank=True)
    batch = models.CharField(max_length=64, blank=True)
    backend = models.CharField(max_length=10)
    world_size = models.PositiveSmallIntegerField(default=0)
    bytes = models.PositiveIntegerField()
    allreduce_us = models.FloatField(null=True, blank=True, help_text="Median per call, slowest rank.")
    error = models.CharField(max_length=500, blank=True)
    baseline_us = models.FloatField(null=True, blank=True, help_text="Median of the host's earlier checks.")
    drift = models.FloatField(null=True, blank=True, help_text="(allreduce_us - baseline_us) / baseline_us")
    flagged = models.BooleanField(default=False)
    note = models.CharField(max_length=500, blank=True)
    measured_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-measured_at", "-id"]

    def __str__(self):
        figure = f"{self.allreduce_us:.1f} us" if self.allreduce_us is not None else "failed"
        return f"{self.hostname} allreduce {figure}{' (flagged)' if self.flagged else ''}"
