"""The home page's per-benchmark cache (bench.domain.home_cache): after every kind of write the page
shows what the raw tables say, the benchmarks no write touched come from the cache, and the
queries stay as many whatever the history holds."""
import io
import random
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchsite.bench.admin import MeasurementAdmin
from benchsite.bench.definitions.apply import config_apply
from benchsite.bench.lifecycle.cancel import run_cancel
from benchsite.bench.lifecycle.complete import run_complete
from benchsite.bench.lifecycle.fail import run_fail
from benchsite.bench.models import Benchmark, EngineSource, HomeVersion, Measurement, Run, Variant
from benchsite.bench.domain import home_cache
from benchsite.bench.pages import home
from benchsite.regressions.models import Verdict
from benchsite.regressions.outcomes import outcomes_refresh

pytestmark = pytest.mark.django_db


def _run(benchmark, variant, *, tok_s=40.0, correct=1.0, state="SUCCEEDED", branch="main", hours=0.0, commit=None,
         trigger="webhook"):
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=state, branch=branch,
                             commit=commit if commit is not None else uuid.uuid4().hex, trigger=trigger,
                             task_id=f"t-{uuid.uuid4().hex[:8]}")
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() + timedelta(hours=hours))
    if state == "SUCCEEDED" and tok_s is not None:
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher")
        if correct is not None:
            Measurement.objects.create(run=run, metric="correct", value=correct, direction="higher")
    return run


@pytest.fixture
def scene(db):
    """Two benchmarks: one on a git engine's main line (runs on main and on another branch), one on
    the installed engine; a few runs each, one running, one queued."""
    source = EngineSource.objects.create(name="vllm", kind="git", repo_url="https://github.com/acme/vllm",
                                         default_ref="main")
    git = Benchmark.objects.create(name="A git", slug="a-git", model="m", engine_source=source)
    plain = Benchmark.objects.create(name="B installed", slug="b-installed", model="m")
    variants = {b.slug: [Variant.objects.create(benchmark=b, position=i + 1, name=f"v{i + 1}") for i in range(3)]
                for b in (git, plain)}
    for i in range(6):
        for b in (git, plain):
            for j, v in enumerate(variants[b.slug]):
                _run(b, v, tok_s=40.0 + i + 10 * j, correct=0.0 if (i, j) == (3, 1) else 1.0,
                     branch="release" if b is git and i == 4 else "main", hours=-10 + i)
    _run(git, variants["a-git"][0], state="RUNNING")
    _run(plain, variants["b-installed"][1], state="QUEUED")
    outcomes_refresh(run_ids=Run.objects.values_list("id", flat=True))
    return {"source": source, "git": git, "plain": plain, "variants": variants}


def _snapshot(summaries) -> list:
    """Everything of the template context the page shows, as plain values."""
    return [(s["benchmark"].pk, s["benchmark"].name,
             [(v["variant"].pk, v["variant"].name, v["variant"].position, v["variant"].benchmark.pk, v["latest"],
               v["previous"], v["change"], v["verdict"], v["verdict_run"], v["outcome"], v["outcome_final"], v["spark"])
              for v in s["variants"]],
             [(r.pk, r.state, r.phase, r.variant.name) for r in s["active"]]) for s in summaries]


def _page(client):
    response = client.get("/")
    assert response.status_code == 200
    return _snapshot(response.context["summaries"])


def _check(client):
    """The page (through the cache) equals the summaries computed from the raw tables."""
    shown = _page(client)
    assert shown == _snapshot(home.home_benchmarks(cached=False))
    return shown


def _queries(client) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    return len(ctx)


def _latest(benchmark, variant=None) -> Run:
    runs = Run.objects.filter(benchmark=benchmark, state="SUCCEEDED")
    return (runs.filter(variant=variant) if variant else runs).order_by("-created_at", "-id").first()


# --- each kind of write ----------------------------------------------------------------------


def _result_lands(scene, rng=None):
    variant = (rng or random).choice(scene["variants"]["a-git"])
    run = _run(scene["git"], variant, state="RUNNING")
    value = 100.0 + (rng or random).random()
    assert run_complete(run_id=run.pk, task_id=run.task_id, result={"measurements": [
        {"metric": "decode_tok_s", "value": value, "unit": "tok/s", "direction": "higher"},
        {"metric": "correct", "value": 1.0, "direction": "higher"}]})


def _run_fails(scene, rng=None):
    run = _run(scene["plain"], scene["variants"]["b-installed"][0], state="RUNNING")
    assert run_fail(run_id=run.pk, error="boom", task_id=run.task_id)


def _outcome_rejudged(scene, rng=None):
    run = _latest(scene["git"])
    kind = "improvement" if Verdict.objects.filter(run=run, kind="regression").exists() else "regression"
    Verdict.objects.update_or_create(run=run, metric="decode_tok_s", point="",
                                     defaults={"kind": kind, "threshold": 0.03, "effect": -0.2})
    outcomes_refresh(run_ids=[run.pk])  # stored with QuerySet.update: no signal


def _correctness_rejudged(scene, rng=None):
    run = _latest(scene["plain"])
    Measurement.objects.update_or_create(run=run, metric="correct", defaults={"value": 0.0})


def _cancelled(scene, rng=None):
    run = Run.objects.filter(state__in=["QUEUED", "RUNNING"]).order_by("id").first() or _run(
        scene["plain"], scene["variants"]["b-installed"][2], state="QUEUED")
    assert run_cancel(run=run)


def _variant_renamed(scene, rng=None):
    variant = Variant.objects.filter(benchmark=scene["git"]).order_by("position").first()
    variant.name = f"renamed {uuid.uuid4().hex[:6]}"
    variant.save()


def _run_deleted(scene, rng=None):
    _latest(scene["git"]).delete()


def _main_line_changed(scene, rng=None):
    source = scene["source"]
    source.default_ref = "release" if source.default_ref == "main" else "main"
    source.save()  # no signal the cache listens to: the entry's main line differs


def _engine_changed(scene, rng=None):
    benchmark = Benchmark.objects.get(pk=scene["git"].pk)
    benchmark.engine_source = None if benchmark.engine_source_id else scene["source"]
    benchmark.save()


def _variants_renumbered(scene, rng=None):
    """definitions/apply renumbers with QuerySet.update."""
    names = list(Variant.objects.filter(benchmark=scene["plain"]).order_by("position").values_list("name", flat=True))
    config_apply(data={"benchmarks": [{"slug": "b-installed", "name": "B installed", "model": "m",
                                       "variants": [{"name": n} for n in reversed(names)]}]})


def _measurement_deleted_in_admin(scene, rng=None):
    run = _latest(scene["plain"])
    MeasurementAdmin(Measurement, None).delete_queryset(None, Measurement.objects.filter(run=run, metric="decode_tok_s"))


def _other_branch_result(scene, rng=None):
    run = _run(scene["git"], scene["variants"]["a-git"][2], state="RUNNING")
    Run.objects.filter(pk=run.pk).update(branch="release")
    run_complete(run_id=run.pk, task_id=run.task_id, result={"measurements": [
        {"metric": "decode_tok_s", "value": 7.0, "unit": "tok/s", "direction": "higher"}]})


WRITES = [_result_lands, _run_fails, _outcome_rejudged, _correctness_rejudged, _cancelled, _variant_renamed,
          _run_deleted, _main_line_changed, _engine_changed, _variants_renumbered, _measurement_deleted_in_admin,
          _other_branch_result]


# a failed run and a run on another branch than the main line are not on the page
SHOWN_NOWHERE = {_run_fails, _other_branch_result}


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.__name__.strip("_"))
def test_the_cached_page_equals_the_computation_after_each_kind_of_write(client, scene, write):
    before = _check(client)
    assert _queries(client) == 2  # every benchmark cached: the benchmarks with their versions, the active runs
    write(scene)
    after = _check(client)
    if write not in SHOWN_NOWHERE:
        assert after != before, "the write changes what the page shows"


def test_only_the_benchmark_written_to_is_recomputed(client, scene, monkeypatch):
    _check(client)
    computed = []
    kept = home_cache.summaries

    def spy(benchmarks, compute):
        return kept(benchmarks, lambda missing: computed.append([b.pk for b in missing]) or compute(missing))

    monkeypatch.setattr(home_cache, "summaries", spy)
    _result_lands(scene)
    _page(client)
    _page(client)
    assert computed == [[scene["git"].pk]]


def test_a_bulk_write_is_seen_after_bench_rollup(client, scene):
    shown = _check(client)
    variant = scene["variants"]["b-installed"][0]
    run = Run.objects.bulk_create([Run(benchmark=scene["plain"], variant=variant, batch=uuid.uuid4(),
                                       state="SUCCEEDED", commit="f" * 40, created_at=timezone.now())])[0]
    run = run if run.pk else Run.objects.order_by("-id").first()
    Measurement.objects.bulk_create([Measurement(run=run, metric="decode_tok_s", value=1.5)])
    assert _page(client) == shown  # no signal: the cached entry stands until...
    call_command("bench_rollup", stdout=io.StringIO())
    assert _check(client) != shown


def test_queries_are_as_many_with_a_longer_history(client, scene):
    _check(client)
    small = (_queries(client), )
    _result_lands(scene)
    small += (_queries(client), _queries(client))
    variants = scene["variants"]["a-git"]
    start = timezone.now() - timedelta(days=30)
    runs = Run.objects.bulk_create([Run(benchmark=scene["git"], variant=variants[n % 3], batch=uuid.uuid4(),
                                        state="SUCCEEDED", branch="main", commit=f"{n:040x}",
                                        created_at=start + timedelta(minutes=n)) for n in range(1500)])
    ids = [r.pk for r in runs] if runs[0].pk else list(Run.objects.order_by("-id").values_list("id", flat=True)[:1500])
    Measurement.objects.bulk_create([Measurement(run_id=i, metric=m, value=40.0) for i in ids
                                     for m in ("decode_tok_s", "correct")])
    call_command("bench_rollup", stdout=io.StringIO())
    _check(client)
    large = (_queries(client), )
    _result_lands(scene)
    large += (_queries(client), _queries(client))
    assert small == large == (2, 4, 2)  # warm, one benchmark recomputed, warm again


def test_a_benchmark_deleted_leaves_no_version(client, scene):
    _check(client)
    assert HomeVersion.objects.filter(benchmark=scene["git"]).exists()
    Benchmark.objects.get(pk=scene["git"].pk).delete()
    assert not HomeVersion.objects.filter(benchmark_id=scene["git"].pk).exists()
    _check(client)


def test_a_cache_that_fails_costs_the_computation_not_the_page(client, scene, monkeypatch):
    def broken(*args, **kwargs):
        raise ConnectionError("redis away")

    monkeypatch.setattr(home_cache.cache, "get_many", broken)
    monkeypatch.setattr(home_cache.cache, "set_many", broken)
    _check(client)


def test_a_random_sequence_of_writes(client, scene):
    rng = random.Random(21)
    _check(client)
    for _ in range(30):
        rng.choice(WRITES)(scene, rng)
        _check(client)
