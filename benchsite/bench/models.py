"""Benchmarks, their optimization ladders, runs and what the runs measured."""
import hashlib
from functools import partial

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from runners import contract

from .lifecycle import outcome as outcome_rules

POOL_VALIDATOR = RegexValidator(contract.POOL_PATTERN, "Use lowercase letters, digits, '-' and '_'.")


def contract_choices(name: str, pairs) -> type[models.TextChoices]:
    """Model choices built from one of the contract's (value, label) tuples: the web side and
    the workers cannot drift apart (a member per value, named by the value in upper case)."""
    return models.TextChoices(name, [(value.upper(), (value, label)) for value, label in pairs])


class EngineSource(models.Model):
    """Where the engine comes from. `installed` uses the worker's configured vLLM environment."""

    Kind = contract_choices("Kind", contract.ENGINE_SOURCE_KIND_CHOICES)

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.INSTALLED)
    repo_url = models.CharField(max_length=500, blank=True)
    default_ref = models.CharField(max_length=200, blank=True)

    def __str__(self):
        return self.name


class Patch(models.Model):
    """A unified diff applied to the engine source; content-hashed so builds can be cached."""

    name = models.CharField(max_length=200)
    content = models.TextField()
    sha256 = models.CharField(max_length=64, editable=False, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def save(self, *args, **kwargs):
        self.sha256 = hashlib.sha256(self.content.encode()).hexdigest()
        super().save(*args, **kwargs)

    def __str__(self):
        return f"{self.name} ({self.sha256[:10]})"


class Build(models.Model):
    """What a worker actually built for a run (reported back, never assumed by the web side):
    the path taken, the commit it resolved, the engine version and how long it took. The build
    log is the run's `build_log` artifact."""

    Path = contract_choices("Path", contract.BUILD_PATH_CHOICES)

    source = models.ForeignKey(EngineSource, on_delete=models.PROTECT, related_name="builds", null=True, blank=True)
    path = models.CharField(max_length=10, choices=Path.choices, blank=True)
    repo_url = models.CharField(max_length=500, blank=True)
    ref = models.CharField(max_length=250, blank=True)
    commit = models.CharField(max_length=64, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    parent_commit = models.CharField(max_length=64, blank=True, help_text="The commit's first parent, as git says.")
    first_parent_depth = models.PositiveIntegerField(null=True, blank=True,
                                                     help_text="Commits on its first-parent history: orders a branch.")
    patches = models.ManyToManyField(Patch, blank=True)
    cache_key = models.CharField(max_length=64, db_index=True, blank=True)
    cache_hit = models.BooleanField(null=True)
    engine_version = models.CharField(max_length=100, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    log = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.path or 'build'} @ {self.commit[:12] or 'installed'}"


class Benchmark(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    model = models.CharField(max_length=500, help_text="Model path on the GPU host, or a name it can load offline.")
    tensor_parallel_size = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(64)])
    gpu_pool = models.CharField(max_length=40, default="cpu", validators=[POOL_VALIDATOR])
    engine_source = models.ForeignKey(EngineSource, on_delete=models.PROTECT, null=True, blank=True)
    patches = models.ManyToManyField(Patch, blank=True, help_text="Applied to every variant's engine, first.")
    prompt = models.TextField(default="The history of computing began with")
    max_tokens = models.PositiveIntegerField(default=128, validators=[MinValueValidator(2), MaxValueValidator(8192)])
    repeats = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1), MaxValueValidator(100)])
    warmup = models.PositiveSmallIntegerField(default=1, validators=[MaxValueValidator(20)])
    engine_args = models.JSONField(default=list, blank=True, help_text="Flags every variant gets, e.g. [\"--max-model-len\", \"1024\"].")
    engine_env = models.JSONField(default=dict, blank=True, help_text="Environment every variant gets.")
    workloads = models.JSONField(default=list, blank=True, help_text=(
        "Workload points, e.g. [{\"concurrency\": 16, \"prompt_tokens\": 8192, \"max_tokens\": 256}]; "
        "empty: the single point of max_tokens at concurrency 1 (its id c1-p0-m<max_tokens>)."))
    packages = models.JSONField(default=list, blank=True, help_text=(
        "Extra packages the engine needs, e.g. [\"vllm-gguf-plugin==0.0.5\", \"gguf==0.19.0\"]: the worker installs "
        "them from its wheelhouse (BENCH_WHEELHOUSE), without their dependencies."))
    startup_timeout_s = models.PositiveIntegerField(default=600)
    time_limit_s = models.PositiveIntegerField(default=3600)
    thresholds = models.JSONField(default=dict, blank=True, help_text=(
        "Explicit thresholds, metric -> relative change, e.g. {\"decode_tok_s\": 0.01}: they win over the rule "
        "from each series' noise (docs/methods/sensitivity.md)."))
    max_starts_per_side = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(20)], help_text=(
            "Pull-request checks of this benchmark add engine starts a side while undecided, up to this many "
            "(1-20); empty: the watch's pull_requests.max_starts_per_side, else max(6, starts_per_side)."))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def queue(self) -> str:
        return f"gpu.{self.gpu_pool}"

    def clean(self):
        _check_engine_options(self.engine_args, self.engine_env, "engine_args", "engine_env")
        from django.core.exceptions import ValidationError

        from runners.workloads import check_workloads
        try:
            check_workloads(self.workloads, max_tokens=self.max_tokens, engine_args=self.engine_args)
        except contract.SpecError as exc:
            raise ValidationError({"workloads": str(exc)}) from None
        try:
            contract.check_thresholds(self.thresholds)
        except contract.ContractError as exc:
            raise ValidationError({"thresholds": str(exc)}) from None
        try:
            contract.check_packages(self.packages)
        except contract.SpecError as exc:
            raise ValidationError({"packages": str(exc)}) from None

    @property
    def points(self) -> list[contract.WorkloadPoint]:
        """Its workload points; the first is the default (today's decode_tok_s of a run)."""
        return contract.workload_points(self.workloads, self.max_tokens)

    @property
    def default_point(self) -> str:
        try:
            return self.points[0].id
        except contract.SpecError:  # points written past clean(): results still land, on the single point
            return contract.default_point_id(self.max_tokens)


class Variant(models.Model):
    """One ordered step of a benchmark's optimization ladder."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="variants")
    position = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=100)
    flags = models.JSONField(default=list, blank=True, help_text="Engine flags, e.g. [\"--enforce-eager\"].")
    env = models.JSONField(default=dict, blank=True, help_text="Environment, e.g. {\"NCCL_PROTO\": \"LL\"}.")
    patches = models.ManyToManyField(Patch, blank=True)
    is_reference = models.BooleanField(default=False, help_text="Its greedy output is the correctness reference.")
    # A ladder is not always cumulative (the H200 ladder turns custom allreduce off for its NCCL
    # steps): the waterfall measures each step against the one it builds on.
    builds_on = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                  help_text="The step this one changes; empty: the previous position.")

    class Meta:
        ordering = ["benchmark", "position"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "position"], name="variant_position_unique"),
            models.UniqueConstraint(fields=["benchmark", "name"], name="variant_name_unique"),
        ]

    def __str__(self):
        return f"{self.benchmark.name} #{self.position} {self.name}"

    def clean(self):
        _check_engine_options(self.flags, self.env, "flags", "env")


def _check_engine_options(flags, env, flags_field: str, env_field: str) -> None:
    """Only allow-listed engine flags and variables, with values of their type (engine_options.py)."""
    from django.core.exceptions import ValidationError

    from .definitions.engine_options import OptionError, check_env, check_flags

    for field, check, value in ((flags_field, check_flags, flags), (env_field, check_env, env)):
        try:
            check(value)
        except OptionError as exc:
            raise ValidationError({field: str(exc)}) from None


class KeptSpec(models.Model):
    """What a job spec takes from the benchmark and the variant, as runs were triggered with it
    (a template: runners.contract.spec_template, kept by bench/lifecycle/jobspec.py): stored once
    per distinct content, keyed by contract.spec_key (the sha256 of its canonical JSON), and
    pointed at by every run triggered with it, so a benchmark re-applied later changes neither
    what those runs are sent again nor what their page shows. A JobSpec dict in which null stands
    for what the run holds itself (contract.RunOwn: its id, ref, commit, merge base); the run's
    uploaded patches follow the ones here. `settings` is contract.settings_digest of the spec."""

    sha256 = models.CharField(max_length=64, unique=True)
    spec = models.JSONField()
    settings = models.CharField(
        max_length=64, db_index=True, default="",
        help_text="The sha256 of what in the spec can move a figure (jobspec.settings_digest): runs of other "
                  "settings are other series.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"spec {self.sha256[:12]}"


class Run(models.Model):
    class State(models.TextChoices):
        QUEUED = "QUEUED"
        BUILDING = "BUILDING"
        RUNNING = "RUNNING"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        CANCELLED = "CANCELLED"

    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)
    ACTIVE_STATES = (State.BUILDING, State.RUNNING)
    # A trigger's repeats override stays well inside the benchmark's time limit (one run, not 20).
    MAX_REPEATS = 50

    class Trigger(models.TextChoices):
        FORM = "form"
        WEBHOOK = "webhook"
        API = "api"
        SCHEDULE = "schedule"
        IMPORT = "import"
        CLI = "cli"
        PULL = "pull"

    class Priority(models.IntegerChoices):
        """Who goes first on a pool: the broker has no strict priority, so the web side holds the
        lower ones QUEUED (lifecycle/dispatch.runs_release) until the pool has nothing above them."""
        FIRST = 0, "push, pull request, form or API"
        CONFIRM = 1, "confirmation"
        BACKGROUND = 2, "bisection or canary"

    FailureKind = contract_choices("FailureKind", contract.FAILURE_KIND_CHOICES)

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="runs")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="runs")
    build = models.ForeignKey(Build, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    batch = models.UUIDField(db_index=True, help_text="Runs created by one trigger share a batch.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED, db_index=True)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.FORM)
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    commit = models.CharField(max_length=64, blank=True, help_text="The full SHA that ran (the worker resolves `ref`).")
    ref = models.CharField(max_length=250, blank=True, help_text="What was asked for: a branch, tag or commit.")
    merge_base_with = models.CharField(max_length=250, blank=True,
                                       help_text="A branch: the run measures the merge base of `ref` and it (the "
                                                 "worker resolves it; the base side of a pull request).")
    branch = models.CharField(max_length=250, blank=True, db_index=True,
                              help_text="The branch it belongs to: a push's, or a branch ref the worker resolved; "
                                        "empty: none (a commit or tag, the installed engine).")
    patches = models.ManyToManyField(Patch, blank=True, help_text="Patches uploaded with the trigger, on top of the variant's.")
    # PROTECT: a spec row goes (bench_gc) only once no run points at it. No index of its own
    # beyond the one below, built without blocking writes on a big table (migration 0024).
    kept_spec = models.ForeignKey(KeptSpec, on_delete=models.PROTECT, null=True, blank=True, related_name="runs",
                                  db_index=False, help_text="The benchmark's and variant's part of the job spec it "
                                  "was triggered with; empty: a run from before specs were kept (its page rebuilds "
                                  "the spec from the benchmark as it is now).")
    repeats = models.PositiveSmallIntegerField(null=True, blank=True,
                                               validators=[MinValueValidator(1), MaxValueValidator(MAX_REPEATS)],
                                               help_text="Timed repeats asked for at the trigger; empty: the benchmark's.")
    task_id = models.CharField(max_length=64, blank=True)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.FIRST)
    host_queue = models.CharField(max_length=200, blank=True,
                                  help_text="Sent first to this host's queue of the pool; empty: the pool's queue.")
    sent_at = models.DateTimeField(null=True, blank=True,
                                   help_text="When its message went to the broker; empty: held or not sent yet.")
    attempts = models.PositiveSmallIntegerField(default=1, help_text="Executions started: 2 once the reaper "
                                                "re-queued a run whose worker was lost (BENCH_REAPER_REQUEUE).")
    worker_host = models.CharField(max_length=200, blank=True)
    host_info = models.JSONField(default=dict, blank=True, help_text="What the worker reported of its machine: "
                                 "host name, GPU model and count, driver, CPU model (runners.hostinfo).")
    host_fingerprint = models.CharField(max_length=300, blank=True, db_index=True,
                                        help_text="GPU model and count, driver, CPU model: verdicts compare "
                                                  "only runs of the same fingerprint. Empty: an older worker.")
    phase = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    failure_kind = models.CharField(max_length=10, choices=FailureKind.choices, blank=True,
                                    help_text="Where a failed run failed.")
    live_log = models.TextField(blank=True, help_text="The build's and engine's log tail (last 64 KB) the worker "
                                "sent while the run was active; emptied once the stored server log replaces it.")
    notes = models.JSONField(default=list, blank=True, help_text="What the worker noted of a finished run that is not a figure: a workload point skipped because the engine cannot hold it.")
    took_effect = models.JSONField(default=dict, blank=True,
                                   help_text="Per setting of the variant: asked, effective, verdict and the "
                                             "engine's own log lines that show it (runners.analysis.evidence).")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the run found (bench/outcome.py), stored so that lists filter and sort on it; kept up
    # to date as its judgement, verdicts and confirmations land (regressions/outcomes.py).
    outcome = models.CharField(max_length=12, choices=[(w, w.replace("_", " ")) for w in outcome_rules.WORST_FIRST],
                               default=outcome_rules.PENDING, db_index=True)
    outcome_final = models.BooleanField(default=False, help_text="False while a confirmation or a second look "
                                                                 "may still change the outcome.")
    judged_at = models.DateTimeField(null=True, blank=True,
                                     help_text="When the finished run's verdicts were made (regressions app); "
                                               "empty while they are pending.")
    judgement_missing = models.TextField(blank=True, help_text="What judgement a finished run lacks (correctness, "
                                         "verdicts) and why; empty when every judgement went through.")

    class Meta:
        ordering = ["-created_at", "-id"]
        # The dashboard's newest-first reads of a variant's or a benchmark's runs walk these
        # (the ladder's latest runs: 0.5 s -> 15 ms at 10,000 runs, docs/measurements.md).
        indexes = [models.Index(fields=["variant", "created_at", "id"], name="run_variant_created_idx"),
                   models.Index(fields=["benchmark", "created_at", "id"], name="run_benchmark_created_idx"),
                   # a commit or its prefix (the commit and runs APIs): on PostgreSQL LIKE 'abc%' needs the
                   # pattern operator class (1,000,000 runs: a 130 ms scan -> an index lookup)
                   models.Index(fields=["commit"], name="run_commit_prefix_idx", opclasses=["varchar_pattern_ops"]),
                   # bench_gc's check that no run points at a spec row (few distinct values: deduplicated, small)
                   models.Index(fields=["kept_spec"], name="run_kept_spec_idx")]

    def __str__(self):
        return f"run {self.pk} {self.variant.name} {self.state}"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES


class FirstPointManager(models.Manager):
    """A run's figures as every reader before workload points knew them: those of its first point
    (the only one a single-point benchmark has). Readers of the other points use `all_points`."""

    def get_queryset(self):
        return super().get_queryset().filter(first_point=True)


class Measurement(models.Model):
    Direction = contract_choices("Direction", contract.DIRECTION_CHOICES)

    objects = FirstPointManager()
    all_points = models.Manager()

    # No index of its own: the unique (run, metric, point) index below starts with the run (a
    # second one was 73 MB at 1,000,000 runs, docs/methods/service-load.md).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    metric = models.CharField(max_length=100)
    value = models.FloatField()
    unit = models.CharField(max_length=20, blank=True)
    direction = models.CharField(max_length=10, choices=Direction.choices, default=Direction.NONE)
    samples = models.JSONField(default=list, blank=True)
    sample_flags = models.JSONField(default=list, blank=True,
                                    help_text="Parallel to `samples`: '' for a clean repeat, else why it is "
                                              "kept out of every statistic (e.g. 'burst').")
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    point = models.CharField(max_length=100, default="", help_text="The workload point's id, e.g. c16-p8192-m256 "
                             "(runners.contract.WorkloadPoint).")
    first_point = models.BooleanField(default=True, help_text="Of the run's first workload point: its figure "
                                      "where one per run is read (verdicts, charts, comparisons).")
    # The newest write anywhere versions the dashboard's cached charts (a verdict re-judged in place).
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["metric", "point"]
        constraints = [models.UniqueConstraint(fields=["run", "metric", "point"], name="measurement_metric_point_unique")]
        indexes = [models.Index(fields=["metric", "run"], name="measurement_metric_run_idx")]  # one metric's history

    def __str__(self):
        return f"{self.metric}={self.value:g}{self.unit}"


class Artifact(models.Model):
    Kind = contract_choices("Kind", contract.ARTIFACT_KIND_CHOICES)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=200)
    # The file's name in the artifact storage (settings.STORAGES["artifacts"], bench/artifacts.py);
    # empty when it could not be stored, and `error` says why (disk full, over the size cap...).
    file = models.CharField(max_length=500, blank=True)
    size = models.BigIntegerField(default=0, help_text="bytes")
    sha256 = models.CharField(max_length=64, blank=True)
    error = models.CharField(max_length=2000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when the retention policy freed the file (bench/retention/, `bench_gc`): the row stays so
    # the run page can say what was there and why it is gone; `file` is emptied, `size` kept.
    removed_at = models.DateTimeField(null=True, blank=True, help_text="When the retention policy removed the file.")
    removed_reason = models.CharField(max_length=200, blank=True,
                                      help_text="The policy's rule, e.g. 'traces are kept 30 days'.")

    class Meta:
        ordering = ["kind", "name"]
        # bench_gc's walk: one kind's files not yet removed, in id order (the removed ones leave the
        # index, so a daily pass does not walk the years it already freed; ids, unlike times, never tie).
        indexes = [models.Index(fields=["kind", "id"], name="artifact_live_kind_idx",
                                condition=models.Q(removed_at__isnull=True))]

    def __str__(self):
        return f"{self.kind}:{self.name}"

    def read_text(self, max_bytes: int = 4 * 1024 * 1024) -> str:
        """The start of the stored file as text ("" when it was not stored); for small ones."""
        from .storage.artifacts import read_bytes

        if not self.file:
            return ""
        return read_bytes(self.file, max_bytes=max_bytes).decode("utf-8", errors="replace")


@receiver(post_delete, sender=Artifact)
def _artifact_file_deleted(sender, instance, **kwargs):
    """A deleted row (a run deleted in the admin) takes its file along, once the deletion commits."""
    if instance.file:
        from .storage.artifacts import delete

        transaction.on_commit(partial(delete, instance.file))


class Annotation(models.Model):
    """A note on a benchmark's history ("enabled CUDA graphs") at a commit or over a date range;
    every chart of the benchmark shows it."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="annotations")
    text = models.CharField(max_length=200)
    commit = models.CharField(max_length=64, blank=True, help_text="A commit (prefix) the note is about.")
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "created_at", "id"]

    def __str__(self):
        return self.text


class PoolWorker(models.Model):
    """A GPU worker's latest word that it serves a pool (its own heartbeat, bench.record_worker)."""

    pool = models.CharField(max_length=40, validators=[POOL_VALIDATOR])
    worker = models.CharField(max_length=200, help_text="Celery's node name, e.g. gpu@host.")
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["pool", "-last_seen_at"]
        constraints = [models.UniqueConstraint(fields=["pool", "worker"], name="pool_worker_unique")]

    def __str__(self):
        return f"{self.worker} serves {self.pool}"


class ReaperState(models.Model):
    """One row: when the reaper last ran and since when the web side has been hearing heartbeats
    without a gap (a database outage or a stopped web worker leaves heartbeats unheard in the
    queue, and their silence must not fail live runs)."""

    last_tick_at = models.DateTimeField()
    listening_since = models.DateTimeField()

    def __str__(self):
        return f"reaper: listening since {self.listening_since:%Y-%m-%d %H:%M:%S}"


class SeriesRollup(models.Model):
    """One chart's series (bench.domain.chart_series at MAX_POINTS) kept between requests: rebuilt when a
    result lands, a verdict is re-judged or a run is deleted (bench.domain.rollups), so a chart
    request reads this row instead of its benchmark's whole history."""
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="rollups")
    metric = models.CharField(max_length=100)
    point = models.CharField(max_length=100, blank=True, default="", help_text="A workload point's id; '' the first.")
    shape = models.CharField(max_length=64, blank=True, help_text="The variants and main line it was built for (a hash).")
    source = models.CharField(max_length=64, blank=True, help_text="The raw data's version it was built from (a hash).")
    # Every write that makes the series stale bumps it; a rebuild stores its result only if none came meanwhile.
    generation = models.PositiveBigIntegerField(default=0)
    stale = models.BooleanField(default=True)
    members = models.TextField(blank=True, help_text="The chart JSON's series members, ready to send.")
    full_axis = models.TextField(blank=True, help_text="JSON: every x position's (commit, batch, date), for annotations.")
    built_at = models.DateTimeField(null=True, blank=True)
    rebuilding_since = models.DateTimeField(null=True, blank=True, help_text="A write's rebuild of it started then.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["benchmark", "metric", "point"], name="series_rollup_unique")]

    def __str__(self):
        return f"{self.benchmark_id}:{self.metric}:{self.point or '-'}"


class HomeVersion(models.Model):
    """The version of a benchmark's summaries on the home page (bench.domain.home_cache): a new random
    value on every write that changes them, so that each web process's cached summaries, keyed by
    it, miss at once. A random value rather than a counter: a version is never used twice, even
    after a rolled-back transaction or a restored backup. No database constraint on the benchmark:
    a run deleted with its benchmark may write its row after the benchmark's cascade collected
    it (the benchmark's own deletion removes it then, bench.domain.home_cache)."""
    benchmark = models.OneToOneField(Benchmark, on_delete=models.DO_NOTHING, db_constraint=False, primary_key=True,
                                     related_name="home_version")
    version = models.BigIntegerField()

    def __str__(self):
        return f"{self.benchmark_id}: {self.version}"
