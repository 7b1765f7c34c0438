"""Merge requests reported to GitLab, played by a local server: a commit status on the head and
one note edited in place."""
from benchsite.integrations.pulls.models import Comparison
from benchsite.integrations.pulls.report import comparison_report

from ..conftest import SHA_B
from .conftest import GITLAB_TOKEN, PUBLIC, finish, make_comparison

PROJECT = "/api/v4/projects/group%2Fsub%2Fname"


def test_a_commit_status_and_one_note_edited_in_place(gitlab, db):
    comparison = make_comparison(provider="gitlab", repo_url="https://gitlab.com/group/sub/name", number=7,
                                 state="waiting")
    comparison_report(comparison_id=comparison.id)
    Comparison.objects.filter(id=comparison.id).update(state="queued")  # pending still: not sent again
    comparison_report(comparison_id=comparison.id)
    Comparison.objects.filter(id=comparison.id).update(state="running")
    comparison_report(comparison_id=comparison.id)
    comparison.refresh_from_db()
    comparison_report(comparison_id=finish(comparison, outcome="incorrect", summary="eager: output differs").id)

    statuses = gitlab.calls("POST", "/statuses/")
    assert [s["json"]["state"] for s in statuses] == ["pending", "running", "failed"]
    assert statuses[0]["path"] == f"{PROJECT}/statuses/{SHA_B}"
    assert statuses[0]["headers"]["private-token"] == GITLAB_TOKEN
    assert statuses[0]["json"]["name"] == "decode-bench/tiny-a"
    assert statuses[0]["json"]["target_url"] == f"{PUBLIC}/pr/gitlab.com/group/sub/name/7/"
    assert statuses[0]["json"]["description"].startswith("waiting for a maintainer")
    assert statuses[2]["json"]["description"] == "incorrect: eager: output differs"
    [note] = gitlab.calls("POST", "/notes")
    assert note["path"] == f"{PROJECT}/merge_requests/7/notes"
    edits = gitlab.calls("PUT", f"{PROJECT}/merge_requests/7/notes/1001")
    assert len(edits) == 3 and "### decode-bench/tiny-a: incorrect" in edits[-1]["json"]["body"]
    comparison.pull.refresh_from_db()
    assert comparison.pull.note_id == "1001"


def test_a_cancelled_merge_request_and_no_token(gitlab, settings, db, caplog):
    comparison = make_comparison(provider="gitlab", repo_url="https://gitlab.com/group/sub/name", state="cancelled")
    comparison_report(comparison_id=comparison.id)
    [status] = gitlab.calls("POST", "/statuses/")
    assert status["json"]["state"] == "canceled"
    settings.BENCH_GITLAB_TOKEN = ""
    assert comparison_report(comparison_id=comparison.id) is False
    assert "BENCH_GITLAB_TOKEN is not set" in caplog.text


def test_a_status_gitlab_already_has_is_no_error(gitlab, db):
    comparison = make_comparison(provider="gitlab", repo_url="https://gitlab.com/group/sub/name", number=7)
    comparison_report(comparison_id=comparison.id)
    comparison.save()  # a stale copy: what was sent is forgotten
    assert comparison_report(comparison_id=comparison.id) is True
    first, again = gitlab.calls("POST", "/statuses/")
    assert first["json"] == again["json"] and len(gitlab.calls("POST", "/notes")) == 1
