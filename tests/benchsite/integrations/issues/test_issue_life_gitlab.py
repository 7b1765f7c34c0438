"""A confirmed regression's issue on GitLab, played by a local server: opened once, closed with
the reason when a later change brings the level back (a partial recovery leaves it open)."""
from benchsite.integrations.issues.models import ForgeIssue
from benchsite.integrations.issues.sync import issue_sync
from benchsite.regressions.models import ChangePoint
from benchsite.regressions.signals import change_point_changed

from ..conftest import SHA_A, SHA_B, SHA_C
from ..pulls.conftest import GITLAB_TOKEN
from .conftest import change_point, watch_of

PROJECT = "/api/v4/projects/group%2Fsub%2Fname"


def changed(cp, capture):
    with capture(execute=True):
        change_point_changed.send(sender=ChangePoint, change_point=cp)


def test_opened_once_then_closed_when_a_later_change_restores_the_level(gitlab, settings, queued, db,
                                                                        django_capture_on_commit_callbacks):
    watch = watch_of("https://gitlab.com/group/sub/name")
    cp = change_point(watch.benchmarks.get(), confirmed=True)
    changed(cp, django_capture_on_commit_callbacks)
    changed(cp, django_capture_on_commit_callbacks)  # told twice: still one row
    [issue] = ForgeIssue.objects.all()
    assert issue_sync(issue_id=issue.id) and issue_sync(issue_id=issue.id)
    [post] = gitlab.calls("POST", "/issues")
    assert post["path"] == f"{PROJECT}/issues" and post["headers"]["private-token"] == GITLAB_TOKEN
    assert post["json"]["labels"] == "performance-regression" and post["json"]["title"].startswith(
        "Regression: decode throughput −10.0% on tiny-a/eager at ")
    compare = f"https://gitlab.com/group/sub/name/-/compare/{SHA_A}...{SHA_B}"
    assert compare in post["json"]["description"]

    partly = change_point(cp.benchmark, good=SHA_B, bad=SHA_C, before=90.0, after=95.0, minutes=5)
    changed(partly, django_capture_on_commit_callbacks)
    assert issue_sync(issue_id=issue.id) and gitlab.issues[1]["state"] == "opened"  # 5% below: not restored
    back = change_point(cp.benchmark, good=SHA_B, bad=SHA_C, before=95.0, after=99.5, minutes=6)
    changed(back, django_capture_on_commit_callbacks)
    assert queued == [issue.id] * 4
    assert issue_sync(issue_id=issue.id) and issue_sync(issue_id=issue.id)

    [note] = gitlab.calls("POST", f"{PROJECT}/issues/1/notes")
    assert note["json"]["body"] == (
        f"Closed: a later change restored the level. decode throughput went back to 99.5 tok/s at "
        f"[`{SHA_B[:12]}..{SHA_C[:12]}`](https://gitlab.com/group/sub/name/-/compare/{SHA_B}...{SHA_C}) "
        "(it was 100 tok/s before this regression).")
    [close] = gitlab.calls("PUT", f"{PROJECT}/issues/1")
    assert close["json"] == {"state_event": "close"} and gitlab.issues[1]["state"] == "closed"
    issue.refresh_from_db()
    assert issue.state == "closed" and issue.url == "https://gitlab.com/group/sub/name/-/issues/1"


def test_an_improvement_never_touches_a_closed_issue_or_another_series(gitlab, settings, queued, db,
                                                                       django_capture_on_commit_callbacks):
    watch = watch_of("https://gitlab.com/group/sub/name")
    cp = change_point(watch.benchmarks.get(), confirmed=True)
    changed(cp, django_capture_on_commit_callbacks)
    other_series = change_point(cp.benchmark, good=SHA_B, bad=SHA_C, before=90.0, after=100.0, minutes=5,
                                series_key="tiny-a/eager/cpu/host-b")
    queued.clear()
    changed(other_series, django_capture_on_commit_callbacks)
    assert queued == []
