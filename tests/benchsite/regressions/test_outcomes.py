"""Outcomes stored on runs through the real run life cycle (services + the judging listener):
refreshed when a run finishes, when its confirmation lands, when its batch's reference judges it,
when a user marks its change a false alarm; a commit's outcome."""
import json
import uuid

from benchsite.bench.lifecycle import cancel, claim, complete, fail, trigger
from benchsite.bench.models import Run
from benchsite.regressions.changepoints import changepoint_mark
from benchsite.regressions.models import BisectStep, Bisection, ChangePoint
from benchsite.regressions.outcomes import commit_outcome, commit_runs, outcomes_refresh
from runners import contract

from .conftest import add_run, sha

WOBBLE = [0.0, 1.0, -1.0, 0.5, -0.5]


def _history(benchmark, n=10):
    for i in range(n):
        add_run(benchmark, 100.0 + WOBBLE[i % 5], commit=sha(i + 1))


def _finish(benchmark, value, *, commit, run=None, correct=None, capture):
    """A run of `commit` completed as a worker completes it; the listeners run as after a commit."""
    run = run or Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(), batch=uuid.uuid4(),
                                    state=Run.State.RUNNING, commit=commit, ref="main", branch="main",
                                    worker_host="host-a", trigger=Run.Trigger.WEBHOOK)
    if run.state == Run.State.QUEUED:
        claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
    measurements = [contract.measurement(contract.DECODE_TOK_S, value, samples=[value] * 3)]
    with capture(execute=True):
        assert complete.run_complete(run_id=run.id, result={"measurements": measurements})
    if correct is not None:
        run.measurements.update_or_create(metric=contract.CORRECT, defaults={"value": float(correct)})
    run.refresh_from_db()
    return run


def _outcome(run):
    run.refresh_from_db()
    return run.outcome, run.outcome_final


def test_a_regression_is_pending_until_its_re_run_confirms_it(benchmark, sent, django_capture_on_commit_callbacks):
    _history(benchmark)
    slow = _finish(benchmark, 60.0, commit=sha(99), capture=django_capture_on_commit_callbacks)
    cp = ChangePoint.objects.get(run=slow, metric=contract.DECODE_TOK_S)
    assert cp.confirmation == "pending"
    assert _outcome(slow) == ("pending", False)
    assert commit_outcome(commit_runs(sha(99))) == ("pending", False)

    _finish(benchmark, 61.0, commit=sha(99), run=cp.confirm_run, capture=django_capture_on_commit_callbacks)
    cp.refresh_from_db()
    assert cp.confirmation == "agreed"
    assert _outcome(slow) == ("regressed", True)
    word, final = commit_outcome(commit_runs(sha(99)))
    assert word == "regressed" and [r.id for r in commit_runs(sha(99))] == [slow.id, cp.confirm_run_id]


def test_a_re_run_that_contradicts_the_regression_clears_it_and_later_runs_settle_it(
        benchmark, sent, django_capture_on_commit_callbacks):
    _history(benchmark)
    slow = _finish(benchmark, 60.0, commit=sha(99), capture=django_capture_on_commit_callbacks)
    rerun = ChangePoint.objects.get(run=slow).confirm_run
    _finish(benchmark, 100.3, commit=sha(99), run=rerun, capture=django_capture_on_commit_callbacks)
    assert ChangePoint.objects.get(run=slow).confirmation == "disagreed"
    # no longer a regression; a second look may still come while few runs follow it
    assert _outcome(slow) == ("passed", False)
    for i in range(4):
        _finish(benchmark, 100.0 + WOBBLE[i], commit=sha(200 + i), capture=django_capture_on_commit_callbacks)
    assert _outcome(slow) == ("passed", False)
    _finish(benchmark, 100.0, commit=sha(204), capture=django_capture_on_commit_callbacks)
    assert ChangePoint.objects.get(run=slow).confirmation == "disagreed"  # the detector no longer finds it
    assert _outcome(slow) == ("passed", True)  # settled without a second look


def test_incorrect_output_is_final_at_once_and_the_worst_of_the_commit(benchmark, sent):
    from benchsite.regressions.receivers import judge_when_finished

    _history(benchmark, 3)
    fine = add_run(benchmark, 100.0, commit=sha(50))
    wrong = add_run(benchmark, 300.0, commit=sha(50), correct=False)
    for run in (fine, wrong):
        judge_when_finished(sender=Run, run_id=run.id)
    assert _outcome(wrong) == ("incorrect", True)
    assert _outcome(fine)[0] != "incorrect"
    assert commit_outcome(commit_runs(sha(50))) == ("incorrect", True)


def test_a_reference_run_that_judges_its_batch_refreshes_the_others(benchmark, sent, django_capture_on_commit_callbacks):
    compiled = trigger.variant_create(benchmark=benchmark, name="compiled")
    ids = list(range(100, 140))
    first, = trigger.runs_trigger(benchmark=benchmark, trigger="api", variants=[benchmark.variants.get(name="eager")])
    _complete_with_output(first, ids, django_capture_on_commit_callbacks)
    ref, candidate = trigger.runs_trigger(benchmark=benchmark, trigger="api")
    assert candidate.variant == compiled
    _complete_with_output(candidate, [7] * 40, django_capture_on_commit_callbacks)
    assert _outcome(candidate) == ("incorrect", True)  # judged against the earlier reference at once
    candidate.measurements.filter(metric=contract.CORRECT).update(value=1.0)  # as if that one had agreed
    outcomes_refresh(run_ids=[candidate.id])
    assert _outcome(candidate)[0] == "not_judged"
    _complete_with_output(ref, ids, django_capture_on_commit_callbacks)  # its own batch's reference lands
    assert _outcome(candidate) == ("incorrect", True)


def _complete_with_output(run, token_ids, capture):
    claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
    with capture(execute=True):
        complete.run_complete(run_id=run.id, result={
            "measurements": [contract.measurement(contract.DECODE_TOK_S, 100.0, samples=[100.0] * 3)],
            "artifacts": [{"kind": "probe_json", "name": "greedy.json", "content": json.dumps({"token_ids": token_ids})}]})


def test_failed_and_cancelled_runs_failed(benchmark, sent, django_capture_on_commit_callbacks):
    failed, cancelled = (Run.objects.create(benchmark=benchmark, variant=benchmark.variants.get(), batch=uuid.uuid4(),
                                            state=state, commit=sha(7)) for state in (Run.State.RUNNING, Run.State.QUEUED))
    with django_capture_on_commit_callbacks(execute=True):
        fail.run_fail(run_id=failed.id, error="engine exited")
    cancel.run_cancel(run=cancelled)
    assert _outcome(failed) == ("failed", True) and _outcome(cancelled) == ("failed", True)


def test_a_false_alarm_no_longer_counts_against_its_run(benchmark, sent, django_capture_on_commit_callbacks, settings):
    settings.BENCH_CONFIRM_REGRESSIONS = False  # alerted at once: confirmed without a re-run
    _history(benchmark)
    slow = _finish(benchmark, 60.0, commit=sha(99), capture=django_capture_on_commit_callbacks)
    assert _outcome(slow) == ("regressed", True)
    changepoint_mark(change_point=ChangePoint.objects.get(run=slow), status=ChangePoint.Status.FALSE_ALARM)
    assert _outcome(slow)[0] == "passed"


def test_bisection_and_canary_runs_do_not_count_for_their_commit(benchmark, sent, django_capture_on_commit_callbacks):
    _history(benchmark)
    own = _finish(benchmark, 100.0, commit=sha(42), capture=django_capture_on_commit_callbacks)
    probe = add_run(benchmark, 10.0, commit=sha(42), correct=False)
    bisection = Bisection.objects.create(benchmark=benchmark, variant=own.variant, metric=contract.DECODE_TOK_S,
                                         branch="main", good_commit=sha(1), bad_commit=sha(43))
    BisectStep.objects.create(bisection=bisection, commit=sha(42), run=probe)
    outcomes_refresh(run_ids=[probe.id])
    assert _outcome(probe)[0] == "incorrect"
    assert [r.id for r in commit_runs(sha(42))] == [own.id]
    assert commit_outcome(commit_runs(sha(42)))[0] == own.outcome != "incorrect"
