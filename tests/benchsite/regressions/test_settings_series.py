"""A benchmark re-applied with settings that move its figures (another max_tokens, engine argument,
model) starts a new series: no change point blamed on the next commit, verdicts against runs of the
same settings only (regressions/series.py, KeptSpec.settings)."""
from benchsite.bench.lifecycle import jobspec
from benchsite.regressions.models import ChangePoint, Verdict
from benchsite.regressions.pipeline import run_judge
from runners import contract

from .conftest import add_run, sha

WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def kept(benchmark, **changes):
    """The KeptSpec a run of the benchmark, with CHANGES applied to it, is triggered with."""
    for field, value in changes.items():
        setattr(benchmark, field, value)
    benchmark.save()
    return jobspec.spec_keep(jobspec.spec_template(benchmark, benchmark.variants.get(), repeats=None, ref="main",
                                                   commit="", merge_base_with=""))


def feed(benchmark, levels, spec, start=0, details=None):
    runs = []
    for i, value in enumerate(levels, start=start):
        run = add_run(benchmark, value * (1 + WOBBLE[i % 5] / 100), commit=sha(i + 1), kept_spec=spec, details=details)
        run_judge(run_id=run.id)
        runs.append(run)
    return runs


def decode_verdict(run) -> Verdict:
    return Verdict.objects.get(run=run, metric=contract.DECODE_TOK_S)


def test_a_settings_change_starts_a_new_series_instead_of_a_change_point(benchmark):
    a = kept(benchmark, max_tokens=64)
    b = kept(benchmark, max_tokens=128)  # the same model and engine: only the tokens per request moved
    assert a.settings != b.settings
    before = feed(benchmark, [100.0] * 12, a)
    after = feed(benchmark, [94.0] * 8, b, start=12)
    assert not ChangePoint.objects.filter(metric=contract.DECODE_TOK_S).exists()
    first = decode_verdict(after[0])
    assert first.kind == Verdict.Kind.NOT_ENOUGH_DATA and first.baseline_runs == []
    assert f"runs with others, the newest #{before[-1].id}, are another series" in first.baseline_description
    last = decode_verdict(after[-1])
    assert last.kind == Verdict.Kind.NO_CHANGE and set(last.baseline_runs) == {r.id for r in after[:-1]}


def test_the_same_step_with_the_same_settings_is_a_change_point(benchmark):
    a = kept(benchmark, max_tokens=64)
    runs = feed(benchmark, [100.0] * 12 + [94.0] * 8, a)
    (cp,) = ChangePoint.objects.filter(metric=contract.DECODE_TOK_S)
    assert cp.run == runs[12]


def test_repeats_and_the_commit_are_not_settings(benchmark):
    variant = benchmark.variants.get()
    one = jobspec.spec_template(benchmark, variant, repeats=3, ref="main", commit=sha(1), merge_base_with="")
    two = jobspec.spec_template(benchmark, variant, repeats=9, ref="dev", commit=sha(2), merge_base_with="")
    assert jobspec.spec_keep(one).id != jobspec.spec_keep(two).id
    assert contract.settings_digest(one) == contract.settings_digest(two)
    benchmark.engine_args = ["--max-num-seqs", "4"]
    benchmark.save()
    three = jobspec.spec_template(benchmark, variant, repeats=3, ref="main", commit=sha(1), merge_base_with="")
    assert contract.settings_digest(three) != contract.settings_digest(one)


def test_going_back_to_earlier_settings_continues_their_series(benchmark):
    a, b = kept(benchmark, max_tokens=64), kept(benchmark, max_tokens=128)
    first = feed(benchmark, [100.0] * 6, a)
    middle = feed(benchmark, [80.0] * 3, b, start=6)
    again = feed(benchmark, [100.0], a, start=9)
    verdict = decode_verdict(again[0])
    assert verdict.kind == Verdict.Kind.NO_CHANGE and set(verdict.baseline_runs) == {r.id for r in first}
    assert f"the newest #{middle[-1].id}" in verdict.baseline_description
    assert not ChangePoint.objects.filter(metric=contract.DECODE_TOK_S).exists()


def test_runs_from_before_specs_were_kept_count_in_every_series(benchmark):
    legacy = feed(benchmark, [100.0] * 4, None)
    (run,) = feed(benchmark, [100.0], kept(benchmark, max_tokens=128), start=4)
    assert set(decode_verdict(run).baseline_runs) == {r.id for r in legacy}
    assert "another series" not in decode_verdict(run).baseline_description


def test_a_confirmation_measures_with_the_settings_of_the_run_it_confirms(benchmark, sent,
                                                                           django_capture_on_commit_callbacks):
    """The benchmark is re-applied (max_tokens 128) after a regression at max_tokens 64: the re-run
    still measures 64 tokens at the suspect's commit, is in the suspect's series, and confirms it."""
    from benchsite.bench.lifecycle import claim, complete, jobspec as spec_module

    a = kept(benchmark, max_tokens=64)
    feed(benchmark, [100.0] * 10, a)
    slow = add_run(benchmark, 94.0, commit=sha(99), kept_spec=a)
    kept(benchmark, max_tokens=128)  # the benchmark as it is now
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get(run=slow, metric=contract.DECODE_TOK_S)
    rerun = cp.confirm_run
    assert rerun.kept_spec.settings == a.settings
    spec = spec_module.spec_sent(rerun)
    assert spec["max_tokens"] == 64 and spec["engine"]["commit"] == sha(99)
    assert claim.run_claim(run_id=rerun.id, task_id="t", worker_host="host-a")
    result = {"measurements": [contract.measurement(contract.DECODE_TOK_S, 93.9, samples=[93.9] * 3)]}
    with django_capture_on_commit_callbacks(execute=True):
        assert complete.run_complete(run_id=rerun.id, result=result)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status) == ("agreed", "confirmed")


def test_a_new_measuring_method_starts_a_new_series(benchmark):
    """The probe measures a point another way (its streams primed): figures that name another
    method (details["method"]) are left out of the series, so the step is no change point; runs
    whose figures name none are the original method."""
    a = kept(benchmark, max_tokens=64)
    before = feed(benchmark, [100.0] * 12, a, details={"prefill": None})
    after = feed(benchmark, [60.0] * 8, a, start=12, details={"method": "primed"})
    assert not ChangePoint.objects.filter(metric=contract.DECODE_TOK_S).exists()
    assert decode_verdict(after[0]).kind == Verdict.Kind.NOT_ENOUGH_DATA
    assert "of figures measured the same way (primed)" in decode_verdict(after[-1]).baseline_description
    assert set(decode_verdict(after[-1]).baseline_runs) == {r.id for r in after[:-1]}
    assert set(decode_verdict(before[-1]).baseline_runs) <= {r.id for r in before}
