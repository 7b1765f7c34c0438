"""Canaries: a fixed commit re-run on a schedule; its shift is named in the verdicts of that host."""
from datetime import timedelta

from django.utils import timezone

from benchsite.bench.models import Run
from benchsite.regressions.canary import canaries_trigger_due
from benchsite.regressions.models import Canary, CanaryRun, ChangePoint, Verdict
from benchsite.regressions.pipeline import run_judge
from runners import contract

from .conftest import add_run, sha

WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def test_due_canaries_are_queued_once_per_interval(benchmark, monkeypatch):
    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", lambda *a, **k: type("R", (), {"id": "t"})())
    canary = Canary.objects.create(benchmark=benchmark, variant=benchmark.variants.get(), commit=sha(7), every_hours=6)
    now = timezone.now()
    (run,) = canaries_trigger_due(now=now)
    assert (run.commit, run.state, run.trigger) == (sha(7), Run.State.QUEUED, Run.Trigger.SCHEDULE)
    assert run.priority == Run.Priority.BACKGROUND  # after pushes and confirmations (services.runs_release)
    assert CanaryRun.objects.get(run=run).canary == canary
    assert canaries_trigger_due(now=now + timedelta(hours=5)) == []
    assert len(canaries_trigger_due(now=now + timedelta(hours=6))) == 1


def test_canary_shift_is_named_in_the_verdict(benchmark):
    variant = benchmark.variants.get()
    canary = Canary.objects.create(benchmark=benchmark, variant=variant, commit=sha(7))
    regular = []
    for i in range(8):  # regular runs and canary runs interleaved, both at 100
        regular.append(add_run(benchmark, 100 * (1 + WOBBLE[i % 5] / 100), commit=sha(100 + i)))
        run_judge(run_id=regular[-1].id)
        c = add_run(benchmark, 100 * (1 + WOBBLE[(i + 2) % 5] / 100), commit=sha(7))
        CanaryRun.objects.create(canary=canary, run=c)
        run_judge(run_id=c.id)
    for i in range(4):  # the host slows down by 8%: the canary's fixed commit shows it
        c = add_run(benchmark, 92 * (1 + WOBBLE[i % 5] / 100), commit=sha(7))
        CanaryRun.objects.create(canary=canary, run=c)
        run_judge(run_id=c.id)
    shift = ChangePoint.objects.get(series_key__startswith="canary:")
    assert shift.series_key == "canary:tiny/eager/cpu/host-a" and abs(shift.change + 0.08) < 0.01
    slow = add_run(benchmark, 92.0, commit=sha(200))
    run_judge(run_id=slow.id)
    verdict = Verdict.objects.get(run=slow, metric=contract.DECODE_TOK_S)
    assert verdict.kind == Verdict.Kind.REGRESSION
    assert "canary (a fixed commit) moved -7.9%" in verdict.note and "not this code" in verdict.note
    assert verdict.baseline_runs == [r.id for r in regular]  # canary runs are not in the series


def test_a_reapplied_benchmark_is_not_a_canary_shift(benchmark):
    """The canary's runs after max_tokens changed read lower, as every run does: a new series, not
    the host moving."""
    from benchsite.bench.lifecycle import jobspec

    variant = benchmark.variants.get()
    canary = Canary.objects.create(benchmark=benchmark, variant=variant, commit=sha(7))

    def kept(max_tokens):
        benchmark.max_tokens = max_tokens
        benchmark.save()
        return jobspec.spec_keep(jobspec.spec_template(benchmark, variant, repeats=None, ref=sha(7), commit=sha(7),
                                                       merge_base_with=""))

    for level, spec, n in ((100, kept(64), 8), (92, kept(512), 4)):
        for i in range(n):
            c = add_run(benchmark, level * (1 + WOBBLE[i % 5] / 100), commit=sha(7), kept_spec=spec)
            CanaryRun.objects.create(canary=canary, run=c)
            run_judge(run_id=c.id)
    assert not ChangePoint.objects.filter(series_key__startswith="canary:").exists()
