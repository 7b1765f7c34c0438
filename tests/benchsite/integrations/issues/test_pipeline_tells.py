"""The judgement of a run tells the forge issues of an improvement it detected (which may restore
an earlier regression's level), and not of a regression still to be confirmed."""
from benchsite.integrations.issues.models import ForgeIssue
from benchsite.regressions import pipeline

from ..conftest import SHA_B, SHA_C
from .conftest import change_point, run_at, watch_of


def test_an_improvement_found_by_the_judgement_queues_the_earlier_regressions_issue(
        gitlab, settings, queued, db, monkeypatch, django_capture_on_commit_callbacks):
    watch = watch_of("https://gitlab.com/group/sub/name")
    regression = change_point(watch.benchmarks.get(), confirmed=True)
    issue = ForgeIssue.objects.create(change_point=regression, watch=watch, provider="gitlab", number=1, state="open")
    improvement = change_point(regression.benchmark, good=SHA_B, bad=SHA_C, before=90.0, after=100.0, minutes=5)
    run = run_at(regression.benchmark, SHA_C, minutes=6)
    monkeypatch.setattr(pipeline, "verdicts_compute", lambda run: [])
    monkeypatch.setattr(pipeline, "on_main_line", lambda run: True)
    monkeypatch.setattr(pipeline, "noise_refresh", lambda run: None)
    monkeypatch.setattr(pipeline, "changepoints_detect", lambda run: [improvement])
    with django_capture_on_commit_callbacks(execute=True):
        pipeline._judge_and_confirm(run, is_confirmation=False)
    assert queued == [issue.id]
