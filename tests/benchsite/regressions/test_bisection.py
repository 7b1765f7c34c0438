"""Bisection over a real git repository of 16 commits, one of which adds work per token. The
test plays the GPU worker: each queued run reports the speed that the commit's own file says
(no engine here; the real-engine bisection is not built yet)."""
import pytest

from benchsite.bench.lifecycle import claim, complete, trigger
from benchsite.bench.lifecycle.fail import run_fail
from benchsite.bench.models import Benchmark, EngineSource, Run
from benchsite.regressions.bisection import BisectError, bisection_for_change, bisection_start
from benchsite.regressions.models import Bisection, BisectStep, ChangePoint
from runners import contract

from .conftest import SLOW_FROM, git


@pytest.fixture
def git_benchmark(db, repo, monkeypatch):
    from benchsite.celery import app

    class Queued:
        id = "task-1"

    monkeypatch.setattr(app, "send_task", lambda *a, **k: Queued())  # the test plays the worker
    source = EngineSource.objects.create(name="engine", kind=EngineSource.Kind.GIT, repo_url=repo["url"],
                                         default_ref="main")
    bench = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", engine_source=source)
    trigger.variant_create(benchmark=bench, name="eager", flags=["--enforce-eager"], is_reference=True)
    return bench


def play_worker(repo, capture, *, fail=(), wrong=()):
    """Finish every queued run as its commit would: 100 tok/s, or 90 with the extra work; a
    commit in FAIL fails to build, one in WRONG gives a wrong output. Returns the runs played."""
    played = []
    while (run := Run.objects.filter(state=Run.State.QUEUED).order_by("id").first()) is not None:
        assert claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
        with capture(execute=True):
            if run.commit in fail:
                run_fail(run_id=run.id, error="build failed", failure_kind="build")
            else:
                slow = "EXTRA_WORK = 1" in git(repo["path"], "show", f"{run.commit}:work.py")
                value = 90.0 if slow else 100.0
                result = {"measurements": [
                    contract.measurement(contract.DECODE_TOK_S, value, samples=[value] * 3),
                    contract.measurement(contract.CORRECT, 0.0 if run.commit in wrong else 1.0)]}
                complete.run_complete(run_id=run.id, result=result)
        played.append(run)
    return played


def change_point(bench, good, bad, *, variant=None, metric=contract.DECODE_TOK_S, before=100.0, after=90.0,
                 **fields):
    variant = variant or bench.variants.get(name="eager")
    run = Run.objects.create(benchmark=bench, variant=variant, batch="00000000-0000-0000-0000-000000000001",
                             state=Run.State.SUCCEEDED, commit=bad, ref="main", worker_host="host-a")
    return ChangePoint.objects.create(**{
        "benchmark": bench, "variant": variant, "series_key": f"tiny/{variant.name}/cpu/host-a", "metric": metric,
        "run": run, "index": 10, "commit": bad, "previous_commit": good, "before": before, "after": after,
        "change": (after - before) / before, "is_regression": True, "status": ChangePoint.Status.CONFIRMED,
        **fields})


def test_confirmed_change_is_bisected_to_the_guilty_commit(git_benchmark, repo, django_capture_on_commit_callbacks):
    c = repo["commits"]
    bisection = bisection_for_change(change_point=change_point(git_benchmark, c[0], c[15]))
    assert bisection.commits == c[1:]
    played = play_worker(repo, django_capture_on_commit_callbacks)
    bisection.refresh_from_db()
    assert (bisection.state, bisection.first_bad) == ("found", c[SLOW_FROM])
    assert 1 <= len(played) <= 5  # at most 5 runs of the variant for 15 candidate commits
    steps = list(bisection.steps.all())
    assert all((s.outcome == "bad") == (c.index(s.commit) >= SLOW_FROM) for s in steps)


def test_one_bisection_per_commit_range_once_its_changes_are_settled_on_the_largest_effect(git_benchmark, repo):
    """Several metrics of several variants changed at one commit: the range is bisected once, when
    no confirmation of its changes is still to come, on the variant that moved most (on its decode
    tok/s: the headline metric, even when another of its metrics moved more)."""
    c = repo["commits"]
    eager, compiled = git_benchmark.variants.get(), trigger.variant_create(benchmark=git_benchmark, name="compiled")
    small = change_point(git_benchmark, c[0], c[15])  # eager -10%
    change_point(git_benchmark, c[0], c[15], variant=compiled, metric=contract.ITL_MS_P50, before=10.0, after=40.0)
    large = change_point(git_benchmark, c[0], c[15], variant=compiled, before=100.0, after=30.0)
    rerun = Run.objects.create(benchmark=git_benchmark, variant=eager, batch="00000000-0000-0000-0000-000000000002",
                               commit=c[15], trigger=Run.Trigger.SCHEDULE, priority=Run.Priority.CONFIRM)
    waiting = change_point(git_benchmark, c[0], c[15], metric=contract.ITL_MS_P99, before=10.0, after=11.5,
                           status=ChangePoint.Status.OPEN, confirmation="pending", confirm_run=rerun)
    assert bisection_for_change(change_point=small) is None  # eager's ITL p99 waits for its re-run
    assert not Bisection.objects.exists() and not BisectStep.objects.exists()
    ChangePoint.objects.filter(pk=waiting.pk).update(confirmation="disagreed")
    bisection = bisection_for_change(change_point=ChangePoint.objects.get(pk=waiting.pk))
    assert (bisection.variant, bisection.metric, bisection.change_point) == (compiled, contract.DECODE_TOK_S, large)
    assert (bisection.good_level, bisection.bad_level) == (100.0, 30.0)
    assert bisection_for_change(change_point=small) is None and Bisection.objects.count() == 1
    assert set(Run.objects.filter(bisect_steps__isnull=False).values_list("priority", flat=True)) == {
        Run.Priority.BACKGROUND}


def test_bisection_runs_have_the_repeats_of_the_run_that_showed_the_change(git_benchmark, repo):
    c = repo["commits"]
    cp = change_point(git_benchmark, c[0], c[15])
    Run.objects.filter(pk=cp.run_id).update(repeats=9)
    bisection_for_change(change_point=ChangePoint.objects.get(pk=cp.pk))
    queued = Run.objects.filter(state=Run.State.QUEUED)
    assert queued.exists() and set(queued.values_list("repeats", flat=True)) == {9}


def test_bisection_runs_have_the_settings_of_the_run_that_showed_the_change(git_benchmark, repo):
    """The benchmark re-applied since (max_tokens 256): the steps still measure what the series did."""
    from benchsite.bench.lifecycle import jobspec

    c = repo["commits"]
    cp = change_point(git_benchmark, c[0], c[15])
    variant = git_benchmark.variants.get()
    kept = jobspec.spec_keep(jobspec.spec_template(git_benchmark, variant, repeats=None, ref=c[15], commit=c[15],
                                                   merge_base_with=""))
    Run.objects.filter(pk=cp.run_id).update(kept_spec=kept)
    Benchmark.objects.filter(pk=git_benchmark.pk).update(max_tokens=256)
    bisection_for_change(change_point=ChangePoint.objects.get(pk=cp.pk))
    queued = list(Run.objects.filter(state=Run.State.QUEUED).select_related("kept_spec"))
    assert queued and {run.kept_spec.settings for run in queued} == {kept.settings}
    for run in queued:
        spec = jobspec.spec_sent(run)
        assert spec["max_tokens"] == git_benchmark.max_tokens != 256 and spec["engine"]["commit"] == run.commit


def test_failed_build_and_wrong_output_are_skipped(git_benchmark, repo, django_capture_on_commit_callbacks):
    c = repo["commits"]
    bisection = bisection_for_change(change_point=change_point(git_benchmark, c[0], c[15]))
    first = BisectStep.objects.get(bisection=bisection).commit
    # The first probe's build fails, and the commit after it gives a wrong output.
    played = play_worker(repo, django_capture_on_commit_callbacks, fail={first}, wrong={c[c.index(first) + 1]})
    bisection.refresh_from_db()
    assert (bisection.state, bisection.first_bad) == ("found", c[SLOW_FROM])
    skipped = dict(bisection.steps.filter(outcome="skip").values_list("commit", "note"))
    assert skipped[first].startswith("run failed: build")
    assert len(played) <= 7


def test_by_hand_measures_both_ends_first(git_benchmark, repo, django_capture_on_commit_callbacks, client,
                                         django_user_model):
    c = repo["commits"]
    client.force_login(django_user_model.objects.create_user("ana", password="pw"))
    response = client.post("/b/tiny/bisect/", {"variant": git_benchmark.variants.get().id, "good": c[3],
                                               "bad": "main", "branch": "main"})
    assert response.status_code == 302
    bisection = Bisection.objects.get()
    assert [s.role for s in bisection.steps.all()] == ["good_end", "bad_end"]
    play_worker(repo, django_capture_on_commit_callbacks)
    bisection.refresh_from_db()
    assert (bisection.good_level, bisection.bad_level, bisection.first_bad) == (100.0, 90.0, c[SLOW_FROM])
    page = client.get("/b/tiny/changes/").content.decode()
    assert f'data-id="{bisection.id}" data-state="found"' in page and c[SLOW_FROM] in page


@pytest.mark.parametrize("case, message", [
    ("unrelated", "unrelated commits"),
    ("off_branch", "not on the first-parent history of branch 'main'"),
    ("reversed", "is not an earlier commit than"),
    ("unfetchable", "cannot be fetched"),
    ("bad_ref", "invalid ref"),
])
def test_bad_ranges_schedule_nothing(git_benchmark, repo, case, message):
    c = repo["commits"]
    good, bad = {"unrelated": (repo["orphan"], c[15]), "off_branch": (c[2], repo["side"]),
                 "reversed": (c[12], c[3]), "unfetchable": (c[0], c[15]), "bad_ref": ("--upload-pack=x", c[15])}[case]
    if case == "unfetchable":
        EngineSource.objects.update(repo_url=repo["url"] + "-missing")
        git_benchmark.refresh_from_db()
    with pytest.raises(BisectError, match=message):
        bisection_start(benchmark=git_benchmark, variant=git_benchmark.variants.get(), good=good, bad=bad, branch="main")
    assert not Bisection.objects.exists() and not Run.objects.exists()
