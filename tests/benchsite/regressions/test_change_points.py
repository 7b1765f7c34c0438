"""Change points stored from finished runs: found once at their commit, marked by users."""
import pytest

from benchsite.regressions.changepoints import MarkError, changepoint_mark
from benchsite.regressions.models import ChangePoint, Verdict
from benchsite.regressions.pipeline import run_judge
from runners import contract

from .conftest import add_run, sha

WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


def feed(benchmark, levels, start=0):
    """Finish one run per value, judging each as the service does; returns the runs."""
    runs = []
    for i, value in enumerate(levels, start=start):
        run = add_run(benchmark, value * (1 + WOBBLE[i % 5] / 100), commit=sha(i + 1))
        run_judge(run_id=run.id)
        runs.append(run)
    return runs


def test_step_found_once_at_its_commit(benchmark):
    runs = feed(benchmark, [100.0] * 12 + [94.0] * 8)
    (cp,) = ChangePoint.objects.filter(metric=contract.DECODE_TOK_S)
    assert cp.run == runs[12] and cp.commit == sha(13) and cp.previous_commit == sha(12)
    assert cp.is_regression and cp.change == pytest.approx(-0.06, abs=0.004)
    assert cp.status == ChangePoint.Status.OPEN
    assert cp.series_key == "tiny/eager/cpu/host-a"


def test_noise_gives_no_change_point(benchmark):
    feed(benchmark, [100.0] * 30)
    assert not ChangePoint.objects.exists()


def test_expected_change_resets_the_baseline(benchmark, client, django_user_model):
    runs = feed(benchmark, [100.0] * 10 + [90.0] * 5)
    (cp,) = ChangePoint.objects.all()
    # Before the mark, a run at the new level is judged against the old baseline.
    assert Verdict.objects.get(run=runs[-1], metric=contract.DECODE_TOK_S).kind == Verdict.Kind.REGRESSION
    user = django_user_model.objects.create_user("ana", password="pw")
    client.force_login(user)
    response = client.post(f"/changes/{cp.id}/mark/", {"status": "expected"})
    assert response.status_code == 302
    cp.refresh_from_db()
    assert (cp.status, cp.marked_by) == (ChangePoint.Status.EXPECTED, "ana")
    later = feed(benchmark, [90.0] * 2, start=15)
    verdict = Verdict.objects.get(run=later[-1], metric=contract.DECODE_TOK_S)
    assert verdict.kind == Verdict.Kind.NO_CHANGE
    assert verdict.baseline_runs[0] == runs[10].id and f"since the expected change at run #{runs[10].id}" in verdict.baseline_description
    assert ChangePoint.objects.count() == 1


def test_false_alarm_is_kept_and_not_found_again(benchmark):
    feed(benchmark, [100.0] * 10 + [94.0] * 4)
    (cp,) = ChangePoint.objects.all()
    changepoint_mark(change_point=cp, status="false_alarm")
    feed(benchmark, [94.0] * 4, start=14)
    (again,) = ChangePoint.objects.all()
    assert again.pk == cp.pk and again.status == ChangePoint.Status.FALSE_ALARM
    with pytest.raises(MarkError, match="status must be one of"):
        changepoint_mark(change_point=cp, status="confirmed")


def test_changes_page_and_marks_json(benchmark, client):
    feed(benchmark, [100.0] * 10 + [94.0] * 5)
    cp = ChangePoint.objects.get()
    html = client.get("/b/tiny/changes/").content.decode()
    assert f'data-id="{cp.id}" data-status="open"' in html and "-6." in html
    marks = client.get("/api/benchmarks/tiny/marks/?metric=decode_tok_s").json()
    assert [c["run"] for c in marks["change_points"]] == [cp.run_id]
    assert {v["kind"] for v in marks["verdicts"]} == {"regression"}
    assert client.get("/api/benchmarks/tiny/marks/?metric=nope").status_code == 400
    assert client.post(f"/changes/{cp.id}/mark/", {"status": "expected"}).status_code == 302  # to the login page
    cp.refresh_from_db()
    assert cp.status == ChangePoint.Status.OPEN
