"""bench 0012: old rows read as the pages now show them: one headline ceiling per run (the
profiler's share, else the analytic one), and imported runs created when they were measured."""
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = ("bench", "0011_run_repeats"), ("bench", "0012_display_headline_ceiling_and_import_times")


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def test_old_ceilings_follow_the_headline_share_and_imports_get_their_time():
    apps = _migrate([BEFORE])
    try:
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
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
