"""Deliveries of an issue: an answer lost after the forge opened it finds that issue again, a
failure part-way keeps what was sent, a refusal is recorded, and the task retries like the
pull-request reports."""
import pytest

from benchsite.config import RetryPolicy
from benchsite.integrations.issues import tasks
from benchsite.integrations.issues.models import ForgeIssue
from benchsite.integrations.issues.sync import issue_sync
from benchsite.integrations.forge_api import TransientReportError
from benchsite.regressions.changepoints import changepoint_mark

from .conftest import change_point, watch_of

API = "/api/v3/repos/acme/vllm/issues"


@pytest.fixture
def issue(github, db):
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get(), confirmed=True)
    return ForgeIssue.objects.create(change_point=cp, watch=watch, provider="github")


def test_an_issue_opened_whose_answer_was_lost_is_found_not_opened_again(github, issue):
    marker = f"<!-- decode-bench change point {issue.change_point_id} -->"
    github.issues[7] = {"number": 7, "title": "t", "body": f"older words\n{marker}", "state": "open",
                        "labels": [{"name": "performance-regression"}],
                        "html_url": "https://github.com/acme/vllm/issues/7"}
    assert issue_sync(issue_id=issue.id)
    assert github.calls("POST", "/issues") == []
    [edit] = github.calls("PATCH", f"{API}/7")  # brought to today's words
    assert marker in edit["json"]["body"]
    issue.refresh_from_db()
    assert (issue.number, issue.url) == (7, "https://github.com/acme/vllm/issues/7")


def test_a_transient_failure_part_way_keeps_what_was_sent(github, issue, queued, django_capture_on_commit_callbacks):
    issue_sync(issue_id=issue.id)
    with django_capture_on_commit_callbacks(execute=True):
        changepoint_mark(change_point=issue.change_point, status="false_alarm")
    github.fail("PATCH", f"{API}/1", 502)
    with pytest.raises(TransientReportError):
        issue_sync(issue_id=issue.id)
    issue.refresh_from_db()
    assert issue.attempts == 1 and "HTTP 502" in issue.last_error and issue.state == "open"
    assert issue_sync(issue_id=issue.id)
    assert len(github.calls("POST", f"{API}/1/comments")) == 1  # the closing comment once
    assert [c["json"]["state"] for c in github.calls("PATCH", f"{API}/1")] == ["closed", "closed"]
    issue.refresh_from_db()
    assert (issue.state, issue.last_error) == ("closed", "")


def test_a_refusal_is_recorded_and_not_retried(github, issue, caplog):
    github.fail("POST", API, 403, times=1)
    assert issue_sync(issue_id=issue.id) is False
    issue.refresh_from_db()
    assert issue.number is None and "HTTP 403 scripted failure" in issue.last_error
    assert "not sent" in caplog.text


def test_the_task_retries_a_transient_error_then_gives_up(github, issue, settings, monkeypatch):
    github.fail("POST", API, 503, times=5)
    retries = []

    def retry(**kwargs):
        retries.append(kwargs["countdown"])
        raise RuntimeError("retry")

    monkeypatch.setattr(tasks.sync_issue, "retry", retry)
    settings.BENCH_STATUS_RETRY = RetryPolicy(retries=1, base_s=2.0)
    result = tasks.sync_issue.apply(args=[issue.id])
    assert retries == [2.0] and "retry" in repr(result.result)
    settings.BENCH_STATUS_RETRY = RetryPolicy(retries=0, base_s=2.0)
    assert tasks.sync_issue.apply(args=[issue.id]).get() is False
    assert tasks.sync_issue.apply(args=[999_999]).get() is False  # a change point deleted since


def test_one_row_per_change_point_and_watch(issue):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        ForgeIssue.objects.create(change_point=issue.change_point, watch=issue.watch, provider="github")


def test_on_gitlab_the_lost_issue_is_found_by_its_whole_marker(gitlab, db):
    watch = watch_of("https://gitlab.com/group/sub/name")
    cp = change_point(watch.benchmarks.get(), confirmed=True)
    issue = ForgeIssue.objects.create(change_point=cp, watch=watch, provider="gitlab")
    for iid, cp_id in ((3, cp.id), (4, cp.id * 10)):  # another change point's whose id starts alike
        gitlab.issues[iid] = {"iid": iid, "title": "t", "description": f"<!-- decode-bench change point {cp_id} -->",
                              "state": "opened", "labels": ["performance-regression"],
                              "web_url": f"https://gitlab.com/group/sub/name/-/issues/{iid}"}
    assert issue_sync(issue_id=issue.id)
    [search] = gitlab.calls("GET", "/issues")
    assert f"search=decode-bench+change+point+{cp.id}&in=description" in search["path"]
    assert gitlab.calls("POST", "/issues") == [] and len(gitlab.calls("PUT", "/issues/3")) == 1
    issue.refresh_from_db()
    assert issue.number == 3
