"""What /metrics says: zero on a fresh database, run counts right through every way a run's state
changes, a constant number of queries, no per-run labels."""
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchsite.bench.lifecycle import cancel, claim, complete, fail, progress, trigger
from benchsite.bench.models import Benchmark, PoolWorker, Run, SeriesRollup
from benchsite.metrics.models import RunCount

from .scrape import TOKEN, scrape, value

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def token(settings):
    settings.BENCH_METRICS_TOKEN, settings.BENCH_METRICS_ALLOW = TOKEN, []


@pytest.fixture
def benchmark():
    b = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=16, repeats=2)
    trigger.variant_create(benchmark=b, name="eager", flags=["--enforce-eager"])
    trigger.variant_create(benchmark=b, name="compiled", env={"VLLM_X": "1"})
    return b


def _counted_by_group_by() -> dict:
    """What the triggers must keep: the GROUP BY a scrape avoids."""
    from django.db.models import Count
    rows = Run.objects.order_by().values("state", "benchmark__gpu_pool", "trigger").annotate(n=Count("id"))
    return {(r["state"], r["benchmark__gpu_pool"], r["trigger"]): r["n"] for r in rows}


def _runs_gauge(found) -> dict:
    return {(dict(labels)["state"], dict(labels)["pool"], dict(labels)["trigger"]): v
            for (name, labels), v in found.items() if name == "decode_bench_runs" and v}


def test_a_fresh_database_has_both_named_figures_at_zero(client):
    found = scrape(client)
    for state in Run.State.values:
        for trig in Run.Trigger.values:
            assert value(found, "decode_bench_runs", state=state, pool="cpu", trigger=trig) == 0
    assert value(found, "decode_bench_queue_oldest_age_seconds", pool="cpu") == 0
    assert value(found, "decode_bench_queue_length", pool="cpu") == 0
    assert value(found, "decode_bench_rollup_lag_seconds") == 0
    assert ("decode_bench_forge_reports_total", (("result", "refused"),)) in found  # a counter, from 0
    assert all(name.startswith("decode_bench_") for name, _ in found)
    assert 0 < value(found, "decode_bench_artifacts_disk_free_bytes") <= value(found, "decode_bench_artifacts_disk_size_bytes")


def test_counts_follow_every_state_change(client, benchmark, sent, django_capture_on_commit_callbacks):
    eager, compiled = benchmark.variants.all()
    a, b = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.WEBHOOK)
    c, d = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    assert _runs_gauge(scrape(client)) == {("QUEUED", "cpu", "webhook"): 2, ("QUEUED", "cpu", "api"): 2}

    claim.run_claim(run_id=a.id, task_id="t", worker_host="gpu-a")          # QuerySet.update
    progress.run_progress(run_id=a.id, phase="starting engine", state="RUNNING")
    with django_capture_on_commit_callbacks(execute=True):
        complete.run_complete(run_id=a.id, result={"measurements": [{"metric": "decode_tok_s", "value": 40.0}]})
    claim.run_claim(run_id=b.id, task_id="t", worker_host="gpu-a")
    fail.run_fail(run_id=b.id, error="boom")                                # save()
    cancel.run_cancel(run=c)
    found = scrape(client)
    assert _runs_gauge(found) == {("SUCCEEDED", "cpu", "webhook"): 1, ("FAILED", "cpu", "webhook"): 1,
                                  ("CANCELLED", "cpu", "api"): 1, ("QUEUED", "cpu", "api"): 1}
    assert _runs_gauge(found) == _counted_by_group_by()
    assert value(found, "decode_bench_queue_length", pool="cpu") == 1

    Benchmark.objects.filter(id=benchmark.id).update(gpu_pool="h200x2")      # the pool is the benchmark's now
    Run.objects.filter(id=d.id).update(trigger=Run.Trigger.CLI)
    found = scrape(client)
    assert _runs_gauge(found) == _counted_by_group_by()
    assert value(found, "decode_bench_runs", state="QUEUED", pool="h200x2", trigger="cli") == 1
    assert value(found, "decode_bench_runs", state="QUEUED", pool="h200x2", trigger="api") == 0

    Run.objects.filter(id=a.id).delete()
    benchmark.delete()                                                       # the cascade deletes the rest
    assert _runs_gauge(scrape(client)) == {}
    assert sum(RunCount.objects.values_list("n", flat=True)) == 0


def test_bulk_writes_are_counted_too(client, benchmark):
    """bulk_create and raw SQL send no signals: the counts come from database triggers."""
    variant = benchmark.variants.first()
    Run.objects.bulk_create([Run(benchmark=benchmark, variant=variant, batch="0" * 32, trigger="import",
                                 state=Run.State.SUCCEEDED) for _ in range(5)])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE bench_run SET state = 'FAILED' WHERE id = (SELECT MIN(id) FROM bench_run)")
    assert _runs_gauge(scrape(client)) == {("SUCCEEDED", "cpu", "import"): 4, ("FAILED", "cpu", "import"): 1}


def test_the_recount_agrees_with_the_triggers(benchmark, sent):
    trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM)
    kept = set(RunCount.objects.filter(n__gt=0).values_list("benchmark_id", "state", "trigger", "n"))
    RunCount.objects.update(n=99)
    out = StringIO()
    call_command("bench_metrics_recount", stdout=out)
    assert set(RunCount.objects.values_list("benchmark_id", "state", "trigger", "n")) == kept
    assert out.getvalue().startswith("2 runs counted in 1 rows")


def test_queue_age_workers_and_rollups(client, benchmark, sent):
    run = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM)[0]
    Run.objects.filter(id=run.id).update(created_at=timezone.now() - timedelta(minutes=10))
    PoolWorker.objects.create(pool="cpu", worker="gpu@host-a", last_seen_at=timezone.now() - timedelta(seconds=30))
    PoolWorker.objects.create(pool="h100", worker="gpu@host-b", last_seen_at=timezone.now())
    SeriesRollup.objects.create(benchmark=benchmark, metric="decode_tok_s", stale=True,
                                built_at=timezone.now() - timedelta(seconds=90))
    found = scrape(client)
    assert 600 <= value(found, "decode_bench_queue_oldest_age_seconds", pool="cpu") < 660
    assert value(found, "decode_bench_queue_length", pool="cpu") == 2
    assert value(found, "decode_bench_queue_oldest_age_seconds", pool="h100") == 0  # a worker's pool, no benchmark
    assert 30 <= value(found, "decode_bench_worker_last_seen_seconds", pool="cpu", worker="gpu@host-a") < 60
    assert value(found, "decode_bench_rollup_stale") == 1
    assert 90 <= value(found, "decode_bench_rollup_lag_seconds") < 120


def test_a_scrape_costs_the_same_queries_at_any_number_of_runs(client, benchmark, sent):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured)

    trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM)
    few = queries()
    other = Benchmark.objects.create(name="other", slug="other", model="m", gpu_pool="h100")
    trigger.variant_create(benchmark=other, name="x")
    for _ in range(20):
        trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
        trigger.runs_trigger(benchmark=other, trigger=Run.Trigger.WEBHOOK)
    PoolWorker.objects.create(pool="h100", worker="gpu@b", last_seen_at=timezone.now())
    assert queries() == few == 5


def test_no_label_holds_a_commit_or_a_run_id(client, benchmark, sent, django_capture_on_commit_callbacks):
    runs = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.WEBHOOK)
    Run.objects.update(commit="a" * 40)
    claim.run_claim(run_id=runs[0].id, task_id="t", worker_host="gpu-a")
    with django_capture_on_commit_callbacks(execute=True):
        complete.run_complete(run_id=runs[0].id, result={"measurements": [], "phases": [
            {"phase": "starting engine", "duration_s": 3.0}, {"phase": f"probing run {runs[0].id}", "duration_s": 2.0}]})
    found = scrape(client)
    label_values = {v for _, labels in found for _, v in labels}
    assert not any("a" * 7 in v for v in label_values)
    assert not {str(r.id) for r in runs} & label_values
    allowed = {"state", "pool", "trigger", "phase", "result", "provider", "action", "worker", "le"}
    assert {k for _, labels in found for k, _ in labels} <= allowed
