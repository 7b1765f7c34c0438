"""bench_gc deletes the kept job specs no run points at, and never one a run points at."""
import io

import pytest
from django.core.management import call_command

from benchsite.bench.lifecycle.trigger import runs_trigger
from benchsite.bench.models import Benchmark, KeptSpec, Run
from benchsite.bench.retention.specs import specs_collect

pytestmark = pytest.mark.django_db


def test_bench_gc_deletes_the_specs_of_deleted_runs_and_keeps_the_others(settings, sent):
    settings.BENCH_RETAIN_TRACES_DAYS = settings.BENCH_RETAIN_LOGS_DAYS = 0
    benchmark = Benchmark.objects.create(name="b", slug="b", model="/models/m")
    benchmark.variants.create(position=1, name="eager", flags=["--enforce-eager"])
    benchmark.variants.create(position=2, name="graphs")
    runs = runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    again = runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API, variants=[benchmark.variants.get(name="eager")])
    assert KeptSpec.objects.count() == 2
    runs[0].delete()  # eager's row: still the later run's
    runs[1].delete()  # graphs' row: no run left
    assert specs_collect(dry_run=True) == 1 and KeptSpec.objects.count() == 2
    out = io.StringIO()
    call_command("bench_gc", stdout=out)
    assert "deleted 1 kept job spec(s) no run points at" in out.getvalue()
    assert list(KeptSpec.objects.values_list("id", flat=True)) == [again[0].kept_spec_id]
    assert specs_collect() == 0
