"""regressions 0009: runs finished before judgements were recorded count as judged, except a
succeeded run with no verdict, whose page then says what it lacks (bench_judge judges it)."""
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)
FIELDS = ("bench", "0017_robust_run_judgement")  # Run.judged_at, Run.judgement_missing
BEFORE = [("regressions", "0008_outcome_runs"), FIELDS]
AFTER = [("regressions", "0009_robust_judged_runs")]


def _migrate(targets):
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_old_runs_are_judged_unless_a_succeeded_one_has_no_verdict():
    try:
        apps = _migrate(BEFORE)
        Benchmark, Variant, Run, Measurement = (apps.get_model("bench", m)
                                                for m in ("Benchmark", "Variant", "Run", "Measurement"))
        Verdict = apps.get_model("regressions", "Verdict")
        benchmark = Benchmark.objects.create(name="old", slug="old", model="m")
        variant = Variant.objects.create(benchmark=benchmark, name="eager", position=1)
        finished = timezone.now()

        def run(state, verdict=False):
            r = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state,
                                   finished_at=finished if state != "RUNNING" else None)
            if state == "SUCCEEDED":
                Measurement.objects.create(run=r, metric="decode_tok_s", value=100.0)
            if verdict:
                Verdict.objects.create(run=r, metric="decode_tok_s", kind="no_change", series_key="k", threshold=0.03)
            return r.id

        judged, lost, failed, running = run("SUCCEEDED", verdict=True), run("SUCCEEDED"), run("FAILED"), run("RUNNING")
        Run = _migrate(AFTER).get_model("bench", "Run")
        rows = {r.id: r for r in Run.objects.all()}
        assert rows[judged].judged_at == finished and rows[judged].judgement_missing == ""
        assert rows[failed].judged_at == finished
        assert rows[lost].judged_at is None and rows[lost].judgement_missing.startswith("verdicts: none were stored")
        assert rows[running].judged_at is None and rows[running].judgement_missing == ""
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
