"""The admin's large lists: an estimated count on PostgreSQL past the exact-count bound, the
exact one below it and on SQLite; metric choices from the contract; PostgreSQL without JIT."""
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.bench.admin_lists import EstimatedCountPaginator
from benchsite.bench.models import Benchmark, Measurement, Run, Variant
from runners.contract import METRICS

pytestmark = pytest.mark.django_db


class SmallBound(EstimatedCountPaginator):
    exact_up_to = 1_000


@pytest.fixture
def measurements():
    benchmark = Benchmark.objects.create(name="b", slug="b", model="m")
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="v")
    runs = Run.objects.bulk_create([Run(benchmark=benchmark, variant=variant, batch=uuid.uuid4()) for _ in range(1_500)])
    runs = runs if runs[0].pk else list(Run.objects.all())
    Measurement.objects.bulk_create([Measurement(run_id=r.pk, metric=m, value=1.0) for r in runs
                                     for m in ("decode_tok_s", "ttft_ms", "itl_ms_p50", "correct")])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if connection.vendor == "postgresql" else "SELECT 1")
    return Measurement.objects.order_by("-id")


def test_a_large_list_is_counted_by_the_planner_on_postgresql(measurements):
    with CaptureQueriesContext(connection) as ctx:
        count = SmallBound(measurements, 100).count
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    if connection.vendor == "postgresql":
        assert 3_000 <= count <= 12_000 and "EXPLAIN" in sql and "COUNT(" not in sql.upper()
    else:
        assert count == 6_000 and "COUNT(" in sql.upper()


def test_a_small_list_is_counted_exactly(measurements):
    filtered = measurements.filter(metric="correct", run_id__lte=Run.objects.order_by("id").values_list("id", flat=True)[99])
    assert SmallBound(filtered, 100).count == 100
    assert EstimatedCountPaginator(measurements, 100).count == 6_000  # under the default bound


def test_the_metric_filter_offers_the_registered_metrics_without_reading_the_table(admin_client, measurements):
    with CaptureQueriesContext(connection) as ctx:
        page = admin_client.get("/admin/bench/measurement/", {"metric": "ttft_ms"}).content.decode()
    assert all("DISTINCT" not in q["sql"].upper() for q in ctx.captured_queries)
    assert "?metric=decode_tok_s" in page and "?metric=itl_ms_p99" in page and len(METRICS) > 8
    assert "1500 measurements" in page or "1,500 measurements" in page


@pytest.mark.postgres_pass
def test_postgresql_connections_plan_without_jit():
    """The pages' short queries never pay for JIT compilation (settings.py)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
