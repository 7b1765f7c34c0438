"""Comparisons reported to GitHub, played by a local server: one check run per comparison that
follows its state (with the App), a commit status without one, and one PR comment edited in
place; retries and repeats never send twice."""
import pytest

from benchsite.integrations.pulls import report
from benchsite.integrations.pulls.report import comparison_report

from ..conftest import SHA_B
from .conftest import INSTALLATION, INSTALLATION_TOKEN, PUBLIC, TOKEN, finish, make_comparison

PAGE = f"{PUBLIC}/pr/github.com/acme/vllm/12/"
ROW = "| eager (passed) | 41.2 tok/s | 40.9 tok/s | −0.7% [−2.0%, +0.6%] | identical | 42.0% → 40.0% | — |"


def _check_calls(github):
    """What was sent to check runs (not the look-ups)."""
    return [r for r in github.requests if "/check-runs" in r["path"] and r["method"] != "GET"]


def test_a_check_run_follows_the_comparison_from_queued_to_success(github, db):
    comparison = make_comparison()
    assert comparison_report(comparison_id=comparison.id) is True
    [created] = _check_calls(github)
    assert (created["method"], created["path"]) == ("POST", "/api/v3/repos/acme/vllm/check-runs")
    assert created["headers"]["Authorization"] == f"token {INSTALLATION_TOKEN}"
    assert created["json"]["name"] == "decode-bench/tiny-a" and created["json"]["head_sha"] == SHA_B
    assert created["json"]["status"] == "queued" and created["json"]["external_id"] == str(comparison.id)
    assert created["json"]["details_url"] == PAGE
    comparison.refresh_from_db()
    run_id = comparison.check_run_id
    assert run_id == "1001"

    comparison.state = "running"
    comparison.save()
    comparison_report(comparison_id=comparison.id)
    finish(comparison, summary="eager: decode throughput −0.7% [−2.0%, +0.6%], within 3%")
    comparison_report(comparison_id=comparison.id)
    comparison_report(comparison_id=comparison.id)  # a repeat: nothing new to say

    _, running, done = _check_calls(github)
    assert (running["method"], running["path"]) == ("PATCH", f"/api/v3/repos/acme/vllm/check-runs/{run_id}")
    assert running["json"]["status"] == "in_progress" and "conclusion" not in running["json"]
    assert done["path"] == running["path"] and done["method"] == "PATCH"
    assert (done["json"]["status"], done["json"]["conclusion"]) == ("completed", "success")
    assert done["json"]["output"]["title"].startswith("passed: eager: decode throughput")
    summary = done["json"]["output"]["summary"]
    assert "### decode-bench/tiny-a: passed" in summary and ROW in summary and f"]({PAGE})" in summary
    # the App's JWT checked out (else 401) and one installation token served all three reports
    assert [r["path"] for r in github.requests if "check-runs" not in r["path"]] == [
        "/api/v3/repos/acme/vllm/installation", f"/api/v3/app/installations/{INSTALLATION}/access_tokens"]


@pytest.mark.parametrize("outcome, conclusion", [
    ("regressed", "failure"), ("incorrect", "failure"), ("failed", "failure"), ("improved", "success"),
    ("inconclusive", "neutral"), ("not_judged", "neutral")])
def test_conclusions(github, db, outcome, conclusion):
    comparison = finish(make_comparison(), outcome=outcome, summary=f"eager: {outcome}")
    comparison_report(comparison_id=comparison.id)
    [created] = _check_calls(github)
    assert (created["json"]["status"], created["json"]["conclusion"]) == ("completed", conclusion)
    assert f"### decode-bench/tiny-a: {outcome.replace('_', ' ')}" in created["json"]["output"]["summary"]


def test_a_cancelled_comparison_completes_its_check_run_as_cancelled(github, db):
    comparison = make_comparison(state="running")
    comparison_report(comparison_id=comparison.id)
    comparison.state, comparison.summary = "cancelled", "superseded: a newer push"
    comparison.save()  # a stale copy: its check_run_id and reported are still empty; GitHub knows the run
    comparison_report(comparison_id=comparison.id)
    _, cancelled = _check_calls(github)
    assert cancelled["method"] == "PATCH"
    assert (cancelled["json"]["status"], cancelled["json"]["conclusion"]) == ("completed", "cancelled")
    assert cancelled["json"]["output"]["title"] == "cancelled"
    assert cancelled["json"]["output"]["summary"].startswith("cancelled: superseded: a newer push.")


def test_a_fork_waiting_for_a_maintainer(github, db):
    comparison = make_comparison(state="waiting", pull_requests={"label": "run-bench"})
    comparison_report(comparison_id=comparison.id)
    [created] = _check_calls(github)
    assert created["json"]["status"] == "queued"
    assert created["json"]["output"]["title"] == "waiting for a maintainer"
    assert "add the label `run-bench` or comment `/bench`" in created["json"]["output"]["summary"]


def test_a_retry_after_a_server_error_creates_no_second_check_run(github, db):
    comparison = make_comparison(pull_requests={"comment": True})
    github.fail("POST", "/check-runs", 500)
    with pytest.raises(report.TransientReportError, match="HTTP 500"):
        comparison_report(comparison_id=comparison.id)
    assert comparison_report(comparison_id=comparison.id) is True  # the retry
    finish(comparison)
    github.fail("PATCH", "/issues/comments/", 502)  # the check run went out, the comment did not
    with pytest.raises(report.TransientReportError):
        comparison_report(comparison_id=comparison.id)
    comparison_report(comparison_id=comparison.id)  # the retry sends the comment alone
    comparison_report(comparison_id=comparison.id)

    assert len(github.calls("POST", "/check-runs")) == 2  # the refused one and the one created
    assert [r["json"]["status"] for r in github.calls("PATCH", "/check-runs/")] == ["completed"]
    assert len(github.calls("POST", "/issues/12/comments")) == 1
    edits = github.calls("PATCH", "/issues/comments/1002")
    assert len(edits) == 2 and edits[0]["json"] == edits[1]["json"] and ROW in edits[1]["json"]["body"]


def test_one_comment_shows_each_benchmark_of_the_head(github, db):
    first = make_comparison(pull_requests={"comment": True})
    second = make_comparison(pull=first.pull, slug="tiny-b", state="running")
    comparison_report(comparison_id=first.id)
    comparison_report(comparison_id=second.id)
    finish(first)
    comparison_report(comparison_id=first.id)
    [posted] = github.calls("POST", "/issues/12/comments")
    assert "decode-bench/tiny-a: queued" in posted["json"]["body"]
    assert posted["headers"]["Authorization"] == f"token {INSTALLATION_TOKEN}"
    *_, last = github.calls("PATCH", "/issues/comments/")
    assert "### decode-bench/tiny-a: passed" in last["json"]["body"]
    assert "### decode-bench/tiny-b: running" in last["json"]["body"]
    first.pull.refresh_from_db()
    assert first.pull.comment_id == "1002"


def test_no_comment_unless_the_watch_asks_for_one(github, db):
    comparison_report(comparison_id=finish(make_comparison()).id)
    assert github.calls("POST", "/comments") == [] and github.calls("PATCH", "/comments") == []


def test_a_token_alone_gives_a_commit_status_and_one_comment(github, settings, db):
    settings.BENCH_GITHUB_APP_ID = ""
    settings.BENCH_GITHUB_TOKEN = TOKEN
    comparison = make_comparison()
    comparison_report(comparison_id=comparison.id)
    comparison_report(comparison_id=comparison.id)  # a repeat sends nothing
    finish(comparison, outcome="regressed", summary="eager: decode throughput −8.0% [−9.1%, −6.9%], threshold 3%")
    comparison_report(comparison_id=comparison.id)

    pending, failure = github.calls("POST", "/statuses/")
    assert pending["path"] == f"/api/v3/repos/acme/vllm/statuses/{SHA_B}"
    assert pending["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert pending["json"] == {"state": "pending", "context": "decode-bench/tiny-a", "target_url": PAGE,
                               "description": "queued"}
    assert failure["json"]["state"] == "failure"
    assert failure["json"]["description"] == "regressed: eager: decode throughput −8.0% [−9.1%, −6.9%], threshold 3%"
    [posted] = github.calls("POST", "/issues/12/comments")
    [edited] = github.calls("PATCH", "/issues/comments/")
    assert edited["path"] == "/api/v3/repos/acme/vllm/issues/comments/1001"
    assert "### decode-bench/tiny-a: regressed" in edited["json"]["body"]
    assert _check_calls(github) == [] and github.calls("GET", "/installation") == []


def test_a_deleted_comment_is_posted_again(github, settings, db):
    settings.BENCH_GITHUB_APP_ID, settings.BENCH_GITHUB_TOKEN = "", TOKEN
    comparison = make_comparison()
    comparison_report(comparison_id=comparison.id)
    github.gone.add("1001")
    comparison_report(comparison_id=finish(comparison).id)
    assert len(github.calls("POST", "/issues/12/comments")) == 2
    comparison.pull.refresh_from_db()
    assert comparison.pull.comment_id == "1002"


def test_refused_for_good_or_nothing_to_report_with(github, settings, db, caplog):
    comparison = make_comparison()
    github.fail("POST", "/check-runs", 403)
    assert comparison_report(comparison_id=comparison.id) is False
    assert "HTTP 403 scripted failure" in caplog.text
    settings.BENCH_GITHUB_APP_ID = ""
    assert comparison_report(comparison_id=comparison.id) is False
    assert "neither a GitHub App" in caplog.text
