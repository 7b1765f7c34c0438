"""Verdict and change-point marks on the benchmark page: the table fallback (no JavaScript
needed), the link to the changes page, and the canvas's marks URL."""
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite.bench.models import Benchmark, Measurement, Run, Variant
from benchsite.regressions.models import ChangePoint, Verdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def marked(db):
    benchmark = Benchmark.objects.create(name="marks", slug="marks", model="m")
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="eager <b>")
    runs = []
    for i, tok_s in enumerate((20.0, 20.1, 15.0)):
        run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED",
                                 commit=f"{i + 1:x}" * 40)
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s)
        runs.append(run)
    Verdict.objects.create(run=runs[2], metric="decode_tok_s", kind="regression", effect=-0.25, threshold=0.03)
    Verdict.objects.create(run=runs[1], metric="decode_tok_s", kind="no_change", effect=0.005, threshold=0.03)
    ChangePoint.objects.create(benchmark=benchmark, variant=variant, series_key="k", metric="decode_tok_s",
                               run=runs[2], previous_run=runs[1], index=2, commit=runs[2].commit,
                               before=20.05, after=15.0, change=-0.252, is_regression=True)
    return benchmark, runs


def test_benchmark_page_lists_marks_in_a_table_and_links_the_changes_page(client, marked):
    benchmark, runs = marked
    page = client.get(f"/b/{benchmark.slug}/").content.decode()
    assert f'href="/b/{benchmark.slug}/changes/"' in page
    assert f'data-marks-url="/api/benchmarks/{benchmark.slug}/marks/"' in page
    table = page[page.index('id="chart-marks"'):page.index("</details>", page.index('id="chart-marks"'))]
    rows = table.split("<tr")[2:]  # after the header row
    assert len(rows) == 2  # the regression verdict and the change point; 'no change' is not a mark
    assert f"#{runs[2].pk}" in rows[0] and "regression" in rows[0] and "-25.0%" in rows[0]
    assert "change point" in rows[1] and "-25.2%" in rows[1] and "open" in rows[1]
    assert "eager &lt;b&gt;" in table and "eager <b>" not in table


def test_marks_table_costs_the_same_queries_however_many_marks(client, marked):
    benchmark, runs = marked

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/b/{benchmark.slug}/").status_code == 200
        return len(ctx)

    before = count()
    for run in runs[:2]:
        Verdict.objects.update_or_create(run=run, metric="ttft_ms", defaults={"kind": "improvement", "effect": 0.1,
                                                                              "threshold": 0.03})
    assert count() == before


def test_the_marks_endpoint_the_charts_read(client, marked):
    benchmark, runs = marked
    data = client.get(f"/api/benchmarks/{benchmark.slug}/marks/", {"metric": "decode_tok_s"}).json()
    assert [(v["run"], v["kind"]) for v in data["verdicts"]] == [(runs[2].pk, "regression")]
    assert [(c["run"], c["commit"]) for c in data["change_points"]] == [(runs[2].pk, runs[2].commit)]
