"""`manage.py bench_rollup`: rebuilds series a bulk write left behind, is idempotent, and refuses an
unknown benchmark."""
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchsite.bench.models import Benchmark, Measurement, Run, SeriesRollup, Variant
from benchsite.bench.domain import chart_series as history, rollups

pytestmark = pytest.mark.django_db


@pytest.fixture
def benchmark(db):
    benchmark = Benchmark.objects.create(name="roll", slug="roll", model="m")
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="eager")
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED", commit="1" * 40)
    Measurement.objects.create(run=run, metric="decode_tok_s", value=20.0)
    return benchmark


def _command(*args) -> str:
    out = StringIO()
    call_command("bench_rollup", *args, stdout=out)
    return out.getvalue()


def _chart_runs(benchmark) -> list[int]:
    import json
    body = json.loads(rollups.chart_json(benchmark=benchmark, metric="decode_tok_s"))
    return [p["run"] for p in body["variants"][0]["points"]]


def test_it_builds_every_default_series_then_has_nothing_left_to_do(benchmark):
    first = _command()
    assert f"{len(history.HISTORY_METRICS)} series rebuilt, 0 up to date" in first and "roll: " in first
    assert SeriesRollup.objects.filter(benchmark=benchmark, stale=False).count() == len(history.HISTORY_METRICS)
    again = _command("--benchmark", "roll")
    assert f"0 series rebuilt, {len(history.HISTORY_METRICS)} up to date" in again


def test_a_bulk_import_without_signals_is_found_and_rebuilt(benchmark):
    _command()
    variant = benchmark.variants.get()
    runs = Run.objects.bulk_create([Run(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state="SUCCEEDED",
                                        commit=f"{i + 2}" * 40) for i in range(3)])
    Measurement.objects.bulk_create([Measurement(run=r, metric="decode_tok_s", value=30.0) for r in runs])
    assert not SeriesRollup.objects.filter(stale=True).exists()  # no signal marked them: the chart is behind
    assert len(_chart_runs(benchmark)) == 1
    out = _command()
    assert f"{len(history.HISTORY_METRICS)} series rebuilt" in out
    assert _chart_runs(benchmark) == [benchmark.runs.order_by("id").first().pk, *[r.pk for r in runs]]


def test_rebuild_rebuilds_every_series_even_current_ones(benchmark):
    _command()
    SeriesRollup.objects.update(members="")  # a damaged row: only --rebuild can tell
    out = _command("--rebuild", "--benchmark", "roll")
    assert f"{len(history.HISTORY_METRICS)} series rebuilt, 0 up to date" in out
    assert _chart_runs(benchmark) == [benchmark.runs.get().pk]


@pytest.mark.parametrize("args", [("--benchmark", "nope"), ("--rebuild", "--benchmark", "nope")])
def test_an_unknown_benchmark_is_refused_with_a_message(benchmark, args):
    with pytest.raises(CommandError, match="no benchmark with slug 'nope'"):
        _command(*args)
    assert not SeriesRollup.objects.exists()
