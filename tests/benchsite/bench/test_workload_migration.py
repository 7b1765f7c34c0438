"""bench 0019: benchmarks get workload points, and each measurement its point's id; existing
measurements get their benchmark's single point, c1-p0-m<max_tokens> (runners.contract.WorkloadPoint)."""
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE, AFTER = ("bench", "0018_run_merge_base_with"), ("bench", "0019_workload_points")


def _migrate(target):
    MigrationExecutor(connection).migrate([target])
    return MigrationExecutor(connection).loader.project_state([target]).apps


def test_existing_measurements_get_their_benchmarks_single_point():
    apps = _migrate(BEFORE)
    try:
        get = apps.get_model
        ids = []
        for slug, max_tokens in (("short", 64), ("long", 512)):
            bench = get("bench", "Benchmark").objects.create(name=slug, slug=slug, model="m", max_tokens=max_tokens)
            variant = get("bench", "Variant").objects.create(benchmark=bench, name="eager", position=0)
            run = get("bench", "Run").objects.create(benchmark=bench, variant=variant, batch=uuid.uuid4())
            for metric in ("decode_tok_s", "ttft_ms"):
                ids.append(get("bench", "Measurement").objects.create(run=run, metric=metric, value=1.0).id)

        after = _migrate(AFTER)
        Measurement = after.get_model("bench", "Measurement")
        assert list(Measurement.objects.filter(id__in=ids).order_by("id").values_list("point", "first_point")) == [
            ("c1-p0-m64", True), ("c1-p0-m64", True), ("c1-p0-m512", True), ("c1-p0-m512", True)]
        assert after.get_model("bench", "Benchmark").objects.get(slug="long").workloads == []

        back = _migrate(BEFORE).get_model("bench", "Measurement")
        assert not any(f.name == "point" for f in back._meta.get_fields()) and back.objects.count() == 4
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
