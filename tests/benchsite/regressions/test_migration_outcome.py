"""regressions 0008: every run that existed before outcomes gets the one its correctness, verdicts
and change points decide."""
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("bench", "0012_display_headline_ceiling_and_import_times"), ("regressions", "0007_changepoint_confirm_attempts")]
AFTER = [("regressions", "0008_outcome_runs")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_existing_runs_get_their_outcome():
    apps = _migrate(BEFORE)
    try:
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

        Run = _migrate(AFTER).get_model("bench", "Run")
        outcomes = {r.id: (r.outcome, r.outcome_final) for r in Run.objects.all()}
        assert outcomes == {wrong.id: ("incorrect", True), slow.id: ("pending", False),
                            confirming.id: ("pending", False), fine.id: ("passed", True), new.id: ("not_judged", True),
                            failed.id: ("failed", True), cancelled.id: ("failed", True)}
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
