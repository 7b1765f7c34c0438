"""The chart endpoint's rolled-up series (bench.domain.rollups): a repeat request reads no series,
and every write that changes a chart (a new run, a verdict re-judged in place, a renamed variant, a new annotation)
shows on the next request."""
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.bench.models import Annotation, Benchmark, Measurement, Run, Variant

pytestmark = pytest.mark.django_db


@pytest.fixture
def chart(db):
    benchmark = Benchmark.objects.create(name="cache", slug="cache", model="m")
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="eager")
    run = _run(benchmark, variant, "1" * 40, 20.0)
    return benchmark, variant, run


def _run(benchmark, variant, commit, tok_s, correct=1.0):
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED", commit=commit)
    Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s)
    Measurement.objects.create(run=run, metric="correct", value=correct)
    return run


def _get(client, slug):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/api/benchmarks/{slug}/chart/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    return response.json(), len(ctx)


def test_a_repeat_request_is_served_from_the_rollup_with_the_same_body(client, chart):
    benchmark, _, run = chart
    first, cold = _get(client, benchmark.slug)
    again, warm = _get(client, benchmark.slug)
    # the benchmark, its variants, the rollup, the annotations: no series query, no write
    assert again == first and warm == 4 < cold
    assert first["variants"][0]["points"][0]["run"] == run.pk and first["x_count"] == 1


def test_a_verdict_rejudged_in_place_shows_at_once(client, chart):
    benchmark, _, run = chart
    assert _get(client, benchmark.slug)[0]["variants"][0]["incorrect"] == []
    verdict = Measurement.objects.get(run=run, metric="correct")
    verdict.value = 0.0
    verdict.save()  # as the correctness judge's update_or_create does: no new row, no new run
    data, _ = _get(client, benchmark.slug)
    assert data["variants"][0]["points"] == [] and data["variants"][0]["incorrect"][0]["run"] == run.pk


def test_new_runs_renames_and_annotations_show_at_once(client, chart):
    benchmark, variant, _ = chart
    _get(client, benchmark.slug)
    newer = _run(benchmark, variant, "2" * 40, 25.0)
    Variant.objects.filter(pk=variant.pk).update(name="eager mode")  # no signal, no measurement write
    Annotation.objects.create(benchmark=benchmark, text="enabled CUDA graphs", commit="2" * 8)
    data, _ = _get(client, benchmark.slug)
    series = data["variants"][0]
    assert series["name"] == "eager mode" and [p["run"] for p in series["points"]][-1] == newer.pk
    assert [(a["text"], a["x_from"]) for a in data["annotations"]] == [("enabled CUDA graphs", 1)]


def test_a_deleted_run_leaves_the_chart(client, chart):
    benchmark, variant, run = chart
    other = _run(benchmark, variant, "2" * 40, 25.0)
    assert len(_get(client, benchmark.slug)[0]["variants"][0]["points"]) == 2
    Run.objects.filter(pk=other.pk).delete()
    assert [p["run"] for p in _get(client, benchmark.slug)[0]["variants"][0]["points"]] == [run.pk]


def test_home_sparklines_of_many_variants_stay_within_sqlites_expression_depth(client, chart):
    from benchsite.bench.pages import home

    benchmark, variant, _ = chart
    many = Variant.objects.bulk_create([Variant(benchmark=benchmark, position=i + 2, name=f"v{i}") for i in range(1100)])
    runs = Run.objects.bulk_create([Run(benchmark=benchmark, variant=v, batch=uuid.uuid4(), state="SUCCEEDED") for v in many])
    Measurement.objects.bulk_create([Measurement(run=r, metric="decode_tok_s", value=float(i)) for i, r in enumerate(runs)])
    with CaptureQueriesContext(connection) as ctx:
        response = client.get("/")
    assert response.status_code == 200
    spark = {row["variant"].name: row["spark"] for b in response.context["summaries"] for row in b["variants"]}
    assert spark["v1099"] == "1099" and spark["eager"] == "20"
    assert len(ctx) <= 4 + 1100 // home.VARIANTS_PER_QUERY  # one sparkline query per 150 variants


def test_one_rollup_per_chart_whatever_the_versions(client, chart):
    from benchsite.bench.models import SeriesRollup

    benchmark, variant, _ = chart
    _get(client, benchmark.slug)
    _run(benchmark, variant, "2" * 40, 25.0)
    data, _ = _get(client, benchmark.slug)
    rollup = SeriesRollup.objects.get(benchmark=benchmark, metric="decode_tok_s", point="")
    assert not rollup.stale and data["x_count"] == 2 and SeriesRollup.objects.filter(benchmark=benchmark).count() == 1
