"""Rolled-up chart series (bench.domain.rollups) against a recomputation from the raw tables after
random inserts, deletes and re-judged verdicts, each committed as the service commits them."""
import json
import uuid

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchsite.bench.models import Benchmark, Build, EngineSource, Measurement, Run, SeriesRollup, Variant
from benchsite.bench.domain import chart_series as history, rollups

pytestmark = pytest.mark.django_db

COMMITS = [c * 40 for c in "abcdef"]

# One write: ("add", variant, commit, branch, pull, succeeded, tok/s, verdict, depth), ("delete", i) or ("rejudge", i)
# Mostly runs the chart draws on its line, so re-judged verdicts and deletes often change it.
_mostly = st.sampled_from([True, True, True, False])
_add = st.tuples(st.just("add"), st.integers(0, 1), st.integers(0, len(COMMITS) - 1), st.sampled_from(["main", "main", "feat"]),
                 _mostly.map(lambda x: not x), _mostly, st.floats(1, 500, allow_nan=False), st.sampled_from([1.0, 1.0, 0.0, None]),
                 st.one_of(st.none(), st.integers(1, 50)))
_delete = st.tuples(st.just("delete"), st.integers(0, 30))
_rejudge = st.tuples(st.just("rejudge"), st.integers(0, 30))  # flips the run's verdict (none: judged incorrect)
# a few runs first, so that the deletes and re-judged verdicts that follow have runs to change
WRITES = st.builds(lambda first, rest: first + rest, st.lists(_add, min_size=2, max_size=4),
                   st.lists(st.one_of(_add, _delete, _rejudge, _rejudge), min_size=1, max_size=10))


def _benchmark() -> tuple[Benchmark, list[Variant]]:
    source = EngineSource.objects.create(name=f"vllm-{uuid.uuid4().hex[:8]}", kind="git", default_ref="main")
    benchmark = Benchmark.objects.create(name=f"b-{uuid.uuid4().hex[:8]}", slug=f"b-{uuid.uuid4().hex[:8]}",
                                         model="m", engine_source=source)
    variants = [Variant.objects.create(benchmark=benchmark, position=i + 1, name=f"v{i}") for i in range(2)]
    return Benchmark.objects.select_related("engine_source").get(pk=benchmark.pk), variants


def _apply(benchmark, variants, write) -> None:
    runs = list(Run.objects.filter(benchmark=benchmark).order_by("id"))
    if write[0] == "add":
        _, v, c, branch, pull, succeeded, tok_s, verdict, depth = write
        build = Build.objects.create(commit=COMMITS[c], first_parent_depth=depth, parent_commit=COMMITS[max(c - 1, 0)])
        run = Run.objects.create(benchmark=benchmark, variant=variants[v], batch=uuid.uuid4(), commit=COMMITS[c],
                                 branch=branch, trigger="pull" if pull else "webhook", build=build,
                                 state="SUCCEEDED" if succeeded else "FAILED")
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, ci_low=tok_s - 1, ci_high=tok_s + 1)
        if verdict is not None:
            Measurement.objects.create(run=run, metric="correct", value=verdict)
    elif runs and write[0] == "delete":
        runs[write[1] % len(runs)].delete()
    elif runs:
        run = runs[write[1] % len(runs)]
        verdict = Measurement.objects.filter(run=run, metric="correct").values_list("value", flat=True).first()
        Measurement.objects.update_or_create(run=run, metric="correct", defaults={"value": 1.0 if verdict == 0 else 0.0})


def _recomputed(benchmark) -> dict:
    chart = history.benchmark_history(benchmark=benchmark, metric="decode_tok_s")
    return json.loads(json.dumps(chart, cls=DjangoJSONEncoder))


def _served(benchmark) -> tuple[dict, int]:
    with CaptureQueriesContext(connection) as ctx:
        body = rollups.chart_json(benchmark=benchmark, metric="decode_tok_s")
    return json.loads(body), len(ctx)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=WRITES)
def test_the_rollup_after_committed_writes_equals_a_recomputation(db, writes):
    with transaction.atomic():
        benchmark, variants = _benchmark()
        _served(benchmark)  # the rollup exists before the writes
        for write in writes:
            with TestCase.captureOnCommitCallbacks(execute=True):  # each write commits, as in the service
                _apply(benchmark, variants, write)
            rollup = SeriesRollup.objects.get(benchmark=benchmark, metric="decode_tok_s", point="")
            served, queries = _served(benchmark)
            assert not rollup.stale and queries == 3  # rebuilt by the write's commit, not by this read
            assert served == _recomputed(benchmark), write
        transaction.set_rollback(True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=WRITES)
def test_a_read_before_the_rebuild_never_serves_stale_series(db, writes):
    """Writes whose commit-time rebuild has not run yet (or failed): the rollup is stale, the read rebuilds it."""
    with transaction.atomic():
        benchmark, variants = _benchmark()
        _served(benchmark)
        for write in writes:
            _apply(benchmark, variants, write)
        assert _served(benchmark)[0] == _recomputed(benchmark)
        transaction.set_rollback(True)


def test_a_write_that_changes_no_chart_leaves_the_rollup_current(db):
    benchmark, variants = _benchmark()
    _apply(benchmark, variants, ("add", 0, 0, "main", False, True, 10.0, 1.0, None))
    _served(benchmark)
    run = Run.objects.get(benchmark=benchmark)
    run.phase = "done"
    run.save(update_fields=["phase"])  # progress and heartbeats
    Run.objects.create(benchmark=benchmark, variant=variants[0], batch=uuid.uuid4(), state="QUEUED")
    assert not SeriesRollup.objects.get(benchmark=benchmark, metric="decode_tok_s").stale


def test_other_max_points_and_points_match_a_recomputation(db):
    benchmark, variants = _benchmark()
    for i in range(8):
        _apply(benchmark, variants, ("add", i % 2, i % len(COMMITS), "main", False, True, 10.0 + i, 1.0, i + 1))
    body = json.loads(rollups.chart_json(benchmark=benchmark, metric="decode_tok_s", max_points=3))
    chart = history.benchmark_history(benchmark=benchmark, metric="decode_tok_s", max_points=3)
    assert body == json.loads(json.dumps(chart, cls=DjangoJSONEncoder))
    assert all(len(s["points"]) <= 3 for s in body["variants"])


def test_while_a_writes_rebuild_runs_readers_get_the_previous_series_for_a_bounded_time(db):
    from datetime import timedelta

    from django.utils import timezone

    benchmark, variants = _benchmark()
    _apply(benchmark, variants, ("add", 0, 0, "main", False, True, 10.0, 1.0, None))
    before, _ = _served(benchmark)
    _apply(benchmark, variants, ("add", 0, 1, "main", False, True, 20.0, 1.0, None))  # marked stale, not committed
    rollup = SeriesRollup.objects.filter(benchmark=benchmark, metric="decode_tok_s")
    rollup.update(rebuilding_since=timezone.now())  # as the write's rebuild does when it starts
    during, queries = _served(benchmark)
    assert during == before and queries == 3  # the previous series, no rebuild by the reader
    rollup.update(rebuilding_since=timezone.now() - timedelta(seconds=rollups.REBUILD_GRACE_S + 1))  # it died
    after, _ = _served(benchmark)
    assert after == _recomputed(benchmark) and len(after["variants"][0]["points"]) == 2
    assert rollup.get().rebuilding_since is None and not rollup.get().stale
