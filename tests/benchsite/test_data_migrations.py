"""The data migrations, checked in one walk over the migration graph: the test database goes back
once, to the earliest state a step needs (bench 0008), then forward. Each step creates its rows
with the historical models of its "before" state, migrates to its "after" state (and back, where it
checks going backward), checks the rows, and deletes them with the models of where it ends, so the
next step starts from empty tables. Finally every app goes to its leaf: one walk costs about
what one step's round trip from the leaf would.

The steps follow bench's line of migrations (tests/benchsite/bench/test_migrations.py): 0008 ->
0009; 0011 -> 0012_display_headline -> 0013s, 0014 -> 0013_outcome (regressions 0008 after it) ->
0015 -> 0012_branch -> 0016 -> 0017 (regressions 0009) -> 0018 -> 0019 ... -> 0027 (regressions
0010-0013). The branch step starts at 0011 and checks going back to it, so it runs before the
headline step, which starts from 0011 too. One test function: pytest-django's flush after a
transactional test runs against today's models, so the schema is at the leaf between tests."""
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone as django_timezone

from tests.benchsite.bench.storage.conftest import files_under, fs_storage  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def _migrate(targets, *also):
    """The database at TARGETS; the historical models there, of TARGETS and of ALSO (migrations of
    other apps whose tables a step reads, which no target depends on)."""
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader.project_state([*targets, *also]).apps


def _delete(apps, *labels):
    """Delete every row of the models LABELS ("app.Model", in order) with the historical models of
    APPS, which cascade as the models did then."""
    for label in labels:
        apps.get_model(label).objects.all().delete()


def step_text_in_the_database_moves_into_the_storage_and_back(storage):
    """bench 0009: artifacts stored as text in the database move into the artifact storage."""
    BEFORE, AFTER = ("bench", "0008_run_host_fingerprint"), ("bench", "0009_artifact_storage")
    apps = _migrate([BEFORE])
    Benchmark, Variant, Run, Artifact = (apps.get_model("bench", m) for m in ("Benchmark", "Variant", "Run",
                                                                              "Artifact"))
    benchmark = Benchmark.objects.create(name="old", slug="old", model="m")
    variant = Variant.objects.create(benchmark=benchmark, name="eager", position=0)
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4())
    Artifact.objects.create(run=run, kind="server_log", name="vllm-serve.log", content="INFO é ready\n" * 1000)

    Artifact = _migrate([AFTER]).get_model("bench", "Artifact")
    moved = Artifact.objects.get()
    assert moved.file.startswith(f"runs/{run.id}/") and moved.size == len(("INFO é ready\n" * 1000).encode())
    assert (storage / moved.file).read_text() == "INFO é ready\n" * 1000 and len(moved.sha256) == 64
    assert files_under(storage) == [moved.file]

    apps = _migrate([BEFORE])
    back = apps.get_model("bench", "Artifact").objects.get()
    assert back.content == "INFO é ready\n" * 1000
    _delete(apps, "bench.Benchmark")


SHA_A, SHA_B, SHA_C = "a" * 40, "b" * 40, "c" * 40


def step_existing_runs_get_their_branch_from_what_is_known():
    """bench 0012: existing runs get the branch that is known of them (a push's, a ref that names the
    main line or a watched branch, a re-run's from an earlier run at its commit); the rest none."""
    BEFORE, AFTER = ("bench", "0011_run_repeats"), ("bench", "0012_branch_run_branch")
    HOOKS = ("hooks", "0001_initial")  # the models of hooks too: the migration reads deliveries and watches
    apps = _migrate([BEFORE], HOOKS)
    get = apps.get_model
    source = get("bench", "EngineSource").objects.create(name="vllm", kind="git", repo_url="https://x/o/vllm",
                                                         default_ref="main")
    git_bench = get("bench", "Benchmark").objects.create(name="git", slug="git", model="m", engine_source=source)
    installed = get("bench", "Benchmark").objects.create(name="inst", slug="inst", model="m")
    watch = get("hooks", "RepoWatch").objects.create(repo_url="https://x/o/vllm", repo_key="x/o/vllm",
                                                     branches=["main", "perf/*"], secret_env="S")
    watch.benchmarks.add(git_bench)
    Variant, Run = get("bench", "Variant"), get("bench", "Run")
    variant = Variant.objects.create(benchmark=git_bench, name="eager", position=0)
    other = Variant.objects.create(benchmark=installed, name="eager", position=0)

    def run(trigger, ref="", commit="", bench=git_bench):
        return Run.objects.create(benchmark=bench, variant=variant if bench == git_bench else other,
                                  batch=uuid.uuid4(), trigger=trigger, ref=ref, commit=commit).id

    runs = {
        "push to main": run("webhook", "main", SHA_A),
        "push to perf/x": run("webhook", "perf/x", SHA_B),
        "form, default ref": run("form", "", SHA_A),
        "form, refs/heads/main": run("form", "refs/heads/main", SHA_A),
        "API at a watched branch": run("api", "perf/y", SHA_C),
        "API at a commit": run("api", SHA_B, SHA_B),
        "form at a tag": run("form", "v1.0", SHA_A),
        "confirmation at a pushed commit": run("schedule", SHA_A, SHA_A),
        "bisection probe": run("schedule", "f" * 40, "f" * 40),
        "installed engine": run("cli", bench=installed),
    }
    delivery = get("hooks", "WebhookDelivery").objects.create(provider="github", accepted=True, branch="perf/x",
                                                              commit=SHA_B)
    delivery.runs.add(runs["push to perf/x"])

    Run = _migrate([AFTER], HOOKS).get_model("bench", "Run")
    branches = dict(Run.objects.values_list("id", "branch"))
    assert {name: branches[pk] for name, pk in runs.items()} == {
        "push to main": "main",
        "push to perf/x": "perf/x",
        "form, default ref": "main",
        "form, refs/heads/main": "main",
        "API at a watched branch": "perf/y",
        "API at a commit": "",
        "form at a tag": "",
        "confirmation at a pushed commit": "main",
        "bisection probe": "",
        "installed engine": "",
    }
    apps = _migrate([BEFORE], HOOKS)
    back = apps.get_model("bench", "Run")
    assert not any(f.name == "branch" for f in back._meta.get_fields())
    _delete(apps, "hooks.WebhookDelivery", "hooks.RepoWatch", "bench.Benchmark", "bench.EngineSource")


def step_old_ceilings_follow_the_headline_share_and_imports_get_their_time():
    """bench 0012: old rows read as the pages now show them: one headline ceiling per run (the
    profiler's share, else the analytic one), and imported runs created when they were measured."""
    BEFORE, AFTER = ("bench", "0011_run_repeats"), ("bench", "0012_display_headline_ceiling_and_import_times")
    apps = _migrate([BEFORE])
    Benchmark, Variant, Run, Measurement = (apps.get_model("bench", m) for m in ("Benchmark", "Variant", "Run",
                                                                                 "Measurement"))
    benchmark = Benchmark.objects.create(name="h200", slug="h200", model="m")
    variant = Variant.objects.create(benchmark=benchmark, name="graphs", position=1)
    imported_at = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
    measured = datetime(2026, 11, 30, 14, tzinfo=timezone.utc)

    def run(trigger, **values):
        r = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED",
                               trigger=trigger, started_at=measured, finished_at=measured + timedelta(minutes=2),
                               heartbeat_at=imported_at)
        Run.objects.filter(pk=r.pk).update(created_at=imported_at)
        for metric, value in values.items():
            Measurement.objects.create(run=r, metric=metric, value=value, details={"method": "analytic"})
        return r

    # The 2 x H200 CUDA-graphs step as the runners' ladder file stored it: the analytic ceiling.
    graphs = run("import", decode_tok_s=293.189, allreduce_share=0.084778, allreduce_share_analytic=0.232022,
                 ceiling_tok_s=381.77)
    analytic_only = run("api", decode_tok_s=100.0, allreduce_share_analytic=0.2, ceiling_tok_s=125.0)
    no_share = run("api", decode_tok_s=100.0, ceiling_tok_s=150.0)

    apps = _migrate([AFTER])
    Run, Measurement = apps.get_model("bench", "Run"), apps.get_model("bench", "Measurement")
    ceiling = Measurement.objects.get(run_id=graphs.pk, metric="ceiling_tok_s")
    assert ceiling.value == pytest.approx(293.189 / (1 - 0.084778)) == pytest.approx(320.35, abs=0.01)
    assert ceiling.details["from"] == "profiler" and ceiling.details["share"] == 0.084778
    assert ceiling.details["by_method"]["analytic"] == pytest.approx(381.77, abs=0.01)
    assert Measurement.objects.get(run_id=analytic_only.pk, metric="ceiling_tok_s").value == pytest.approx(125.0)
    assert Measurement.objects.get(run_id=no_share.pk, metric="ceiling_tok_s").value == 150.0  # no input: kept

    moved = Run.objects.get(pk=graphs.pk)
    assert moved.created_at == measured <= moved.started_at <= moved.finished_at == moved.heartbeat_at
    assert Run.objects.get(pk=no_share.pk).created_at == imported_at  # not imported: untouched
    _delete(apps, "bench.Benchmark")


def step_existing_runs_get_their_outcome():
    """regressions 0008: every run that existed before outcomes gets the one its correctness, verdicts
    and change points decide."""
    BEFORE = [("bench", "0012_display_headline_ceiling_and_import_times"),
              ("regressions", "0007_changepoint_confirm_attempts")]
    AFTER = [("regressions", "0008_outcome_runs")]
    apps = _migrate(BEFORE)
    Benchmark, Variant, Run, Measurement = (apps.get_model("bench", m) for m in ("Benchmark", "Variant", "Run",
                                                                                 "Measurement"))
    Verdict, ChangePoint = apps.get_model("regressions", "Verdict"), apps.get_model("regressions", "ChangePoint")
    benchmark = Benchmark.objects.create(name="tiny", slug="tiny", model="m")
    variant = Variant.objects.create(benchmark=benchmark, name="eager", position=1)

    def run(state="SUCCEEDED", correct=1.0, *verdicts):
        r = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state,
                               commit=uuid.uuid4().hex + "00000000")
        if correct is not None:
            Measurement.objects.create(run=r, metric="correct", value=correct)
        for kind, low, high in verdicts:
            Verdict.objects.create(run=r, metric="decode_tok_s", kind=kind, effect=(low + high) / 2, ci_low=low,
                                   ci_high=high, threshold=0.03)
        return r

    wrong = run("SUCCEEDED", 0.0, ("improvement", 0.5, 0.7))
    slow = run("SUCCEEDED", 1.0, ("regression", -0.5, -0.4))
    confirming = run("QUEUED", None)
    ChangePoint.objects.create(benchmark=benchmark, variant=variant, series_key="k", metric="decode_tok_s", run=slow,
                               index=5, before=100, after=50, is_regression=True, confirmation="pending",
                               confirm_run=confirming, confirm_attempts=1)
    fine = run("SUCCEEDED", 1.0, ("no_change", -0.02, 0.02))
    new = run("SUCCEEDED", None, ("not_enough_data", 0, 0))
    failed, cancelled = run("FAILED", None), run("CANCELLED", None)

    apps = _migrate(AFTER)
    Run = apps.get_model("bench", "Run")
    outcomes = {r.id: (r.outcome, r.outcome_final) for r in Run.objects.all()}
    assert outcomes == {wrong.id: ("incorrect", True), slow.id: ("pending", False),
                        confirming.id: ("pending", False), fine.id: ("passed", True), new.id: ("not_judged", True),
                        failed.id: ("failed", True), cancelled.id: ("failed", True)}
    _delete(apps, "bench.Benchmark")


def step_old_runs_are_judged_unless_a_succeeded_one_has_no_verdict():
    """regressions 0009: runs finished before judgements were recorded count as judged, except a
    succeeded run with no verdict, whose page then says what it lacks (bench_judge judges it)."""
    FIELDS = ("bench", "0017_robust_run_judgement")  # Run.judged_at, Run.judgement_missing
    BEFORE, AFTER = [("regressions", "0008_outcome_runs"), FIELDS], [("regressions", "0009_robust_judged_runs")]
    apps = _migrate(BEFORE)
    Benchmark, Variant, Run, Measurement = (apps.get_model("bench", m)
                                            for m in ("Benchmark", "Variant", "Run", "Measurement"))
    Verdict = apps.get_model("regressions", "Verdict")
    benchmark = Benchmark.objects.create(name="old", slug="old", model="m")
    variant = Variant.objects.create(benchmark=benchmark, name="eager", position=1)
    finished = django_timezone.now()

    def run(state, verdict=False):
        r = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state,
                               finished_at=finished if state != "RUNNING" else None)
        if state == "SUCCEEDED":
            Measurement.objects.create(run=r, metric="decode_tok_s", value=100.0)
        if verdict:
            Verdict.objects.create(run=r, metric="decode_tok_s", kind="no_change", series_key="k", threshold=0.03)
        return r.id

    judged, lost, failed, running = run("SUCCEEDED", verdict=True), run("SUCCEEDED"), run("FAILED"), run("RUNNING")
    apps = _migrate(AFTER)
    Run = apps.get_model("bench", "Run")
    rows = {r.id: r for r in Run.objects.all()}
    assert rows[judged].judged_at == finished and rows[judged].judgement_missing == ""
    assert rows[failed].judged_at == finished
    assert rows[lost].judged_at is None and rows[lost].judgement_missing.startswith("verdicts: none were stored")
    assert rows[running].judged_at is None and rows[running].judgement_missing == ""
    _delete(apps, "bench.Benchmark")


def step_existing_measurements_get_their_benchmarks_single_point():
    """bench 0019: benchmarks get workload points, and each measurement its point's id; existing
    measurements get their benchmark's single point, c1-p0-m<max_tokens> (runners.contract.WorkloadPoint)."""
    BEFORE, AFTER = ("bench", "0018_run_merge_base_with"), ("bench", "0019_workload_points")
    apps = _migrate([BEFORE])
    get = apps.get_model
    ids = []
    for slug, max_tokens in (("short", 64), ("long", 512)):
        bench = get("bench", "Benchmark").objects.create(name=slug, slug=slug, model="m", max_tokens=max_tokens)
        variant = get("bench", "Variant").objects.create(benchmark=bench, name="eager", position=0)
        run = get("bench", "Run").objects.create(benchmark=bench, variant=variant, batch=uuid.uuid4())
        for metric in ("decode_tok_s", "ttft_ms"):
            ids.append(get("bench", "Measurement").objects.create(run=run, metric=metric, value=1.0).id)

    after = _migrate([AFTER])
    Measurement = after.get_model("bench", "Measurement")
    assert list(Measurement.objects.filter(id__in=ids).order_by("id").values_list("point", "first_point")) == [
        ("c1-p0-m64", True), ("c1-p0-m64", True), ("c1-p0-m512", True), ("c1-p0-m512", True)]
    assert after.get_model("bench", "Benchmark").objects.get(slug="long").workloads == []

    apps = _migrate([BEFORE])
    back = apps.get_model("bench", "Measurement")
    assert not any(f.name == "point" for f in back._meta.get_fields()) and back.objects.count() == 4
    _delete(apps, "bench.Benchmark")


def step_the_migration_gives_existing_subscriptions_their_kind():
    """regressions 0013: existing subscriptions get their kind, `email` where they have an address,
    else the signed webhook, and no name."""
    apps = _migrate([("regressions", "0012_changepoint_confirm_figures")])
    benchmark = apps.get_model("bench", "Benchmark").objects.create(name="tiny", slug="tiny", model="m")
    Old = apps.get_model("regressions", "Subscription")
    mail = Old.objects.create(benchmark=benchmark, email="perf@example.com").id
    hook = Old.objects.create(benchmark=benchmark, webhook_url="https://ci.example.com/hook").id
    apps = _migrate([("regressions", "0013_subscription_kind_name")])
    New = apps.get_model("regressions", "Subscription")
    assert {s.id: (s.kind, s.name) for s in New.objects.all()} == {mail: ("email", ""), hook: ("webhook", "")}
    _delete(apps, "bench.Benchmark")


def test_each_data_migration_moves_the_rows_it_found(fs_storage):  # noqa: F811 (the fixture imported above)
    try:
        step_text_in_the_database_moves_into_the_storage_and_back(fs_storage)
        step_existing_runs_get_their_branch_from_what_is_known()
        step_old_ceilings_follow_the_headline_share_and_imports_get_their_time()
        step_existing_runs_get_their_outcome()
        step_old_runs_are_judged_unless_a_succeeded_one_has_no_verdict()
        step_existing_measurements_get_their_benchmarks_single_point()
        step_the_migration_gives_existing_subscriptions_their_kind()
    finally:  # every app's latest: going back unapplied the other apps' migrations that follow bench's
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
