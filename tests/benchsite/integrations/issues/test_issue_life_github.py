"""A confirmed regression's issue on GitHub, played by a local server: opened once, updated and
commented when its range is bisected, closed with the reason when triaged, reopened when the
triage is undone; each call once, whatever the retries."""
from benchsite.integrations.issues.models import ForgeIssue
from benchsite.integrations.issues.sync import issue_sync
from benchsite.regressions import bisection as bisection_module
from benchsite.regressions.changepoints import changepoint_mark
from benchsite.regressions.confirm import changepoint_confirm
from benchsite.regressions.models import Bisection

from ..conftest import SHA_A, SHA_B
from ..pulls.conftest import INSTALLATION_TOKEN, PUBLIC, TOKEN
from .conftest import change_point, watch_of

API = "/api/v3/repos/acme/vllm/issues"
SHA_MID = "d" * 40


class User:
    is_authenticated = True

    def get_username(self):
        return "alice"


def confirm(cp, capture, settings):
    settings.BENCH_CONFIRM_REGRESSIONS = False  # confirmed at once: the issue is what is tested here
    with capture(execute=True):
        changepoint_confirm(change_point=cp)


def sync_all() -> list[bool]:
    return [issue_sync(issue_id=i) for i in ForgeIssue.objects.values_list("id", flat=True)]


def test_opened_once_with_title_body_and_label_as_the_app(github, settings, queued, db,
                                                          django_capture_on_commit_callbacks):
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get())
    confirm(cp, django_capture_on_commit_callbacks, settings)
    [issue] = ForgeIssue.objects.all()
    assert queued == [issue.id] and (issue.change_point, issue.watch, issue.provider) == (cp, watch, "github")

    assert sync_all() == [True]
    assert sync_all() == [True]  # delivered twice: nothing more sent
    [post] = github.calls("POST", "/issues")
    assert post["path"] == API and post["headers"]["authorization"] == f"token {INSTALLATION_TOKEN}"
    assert post["json"]["title"] == f"Regression: decode throughput −10.0% on tiny-a/eager at {SHA_B[:12]}"
    assert post["json"]["labels"] == ["performance-regression"]
    body = post["json"]["body"]
    assert "| tiny-a | eager | decode throughput | 100 tok/s | 90 tok/s | −10.0% | [−12.0%, −8.0%] | 3% |" in body
    assert f"[`{SHA_A[:12]}..{SHA_B[:12]}`](https://github.com/acme/vllm/compare/{SHA_A}...{SHA_B})" in body
    assert f"[run]({PUBLIC}/runs/{cp.run_id}/)" in body and "**Bisection:** none yet" in body
    assert f"<!-- decode-bench change point {cp.id} -->" in body
    issue.refresh_from_db()
    assert (issue.number, issue.url, issue.state) == (1, "https://github.com/acme/vllm/issues/1", "open")
    assert [r["method"] for r in github.requests if "/issues" in r["path"]] == ["GET", "POST"]


def test_bisected_then_triaged_then_reopened(github, settings, queued, db, django_capture_on_commit_callbacks):
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get())
    confirm(cp, django_capture_on_commit_callbacks, settings)
    sync_all()
    bisection = Bisection.objects.create(benchmark=cp.benchmark, variant=cp.variant, metric=cp.metric, change_point=cp,
                                         branch="main", good_commit=SHA_A, bad_commit=SHA_B, commits=[SHA_MID, SHA_B])
    with django_capture_on_commit_callbacks(execute=True):
        bisection_module._finish(bisection, Bisection.State.FOUND, f"first bad commit {SHA_MID}", SHA_MID)
    sync_all(), sync_all()
    [edit] = github.calls("PATCH", f"{API}/1")
    found = f"first bad commit [`{SHA_MID[:12]}`](https://github.com/acme/vllm/commit/{SHA_MID})"
    assert f"**Bisection:** {found}" in edit["json"]["body"] and set(edit["json"]) == {"title", "body"}
    [note] = github.calls("POST", f"{API}/1/comments")
    assert note["json"] == {"body": f"Bisected: {found}."}

    with django_capture_on_commit_callbacks(execute=True):
        changepoint_mark(change_point=cp, status="false_alarm", user=User())
    sync_all(), sync_all()
    closing = github.calls("POST", f"{API}/1/comments")[1]
    assert closing["json"]["body"].startswith("Closed: triaged as a false alarm by alice on ")
    assert github.calls("PATCH", f"{API}/1")[1]["json"] == {"state": "closed", "state_reason": "not_planned"}
    assert github.issues[1]["state"] == "closed"

    with django_capture_on_commit_callbacks(execute=True):
        changepoint_mark(change_point=cp, status="open", user=User())
    sync_all(), sync_all()
    assert github.calls("POST", f"{API}/1/comments")[2]["json"] == {"body": "Reopened: the change was marked open "
                                                                            "again by alice."}
    assert github.calls("PATCH", f"{API}/1")[2]["json"] == {"state": "open", "state_reason": "reopened"}
    assert len(github.calls("POST", "/comments")) == 3 and len(github.calls("PATCH", API)) == 3
    assert queued.count(ForgeIssue.objects.get().id) == 4  # confirmed, bisected, marked twice


def test_with_a_personal_token_and_expected_closes_as_not_planned(github, settings, queued, db,
                                                                    django_capture_on_commit_callbacks):
    settings.BENCH_GITHUB_APP_ID, settings.BENCH_GITHUB_TOKEN = "", TOKEN
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get())
    confirm(cp, django_capture_on_commit_callbacks, settings)
    sync_all()
    with django_capture_on_commit_callbacks(execute=True):
        changepoint_mark(change_point=cp, status="expected")
    sync_all()
    assert all(r["headers"]["authorization"] == f"Bearer {TOKEN}" for r in github.requests)
    assert github.calls("POST", "/comments")[0]["json"]["body"].startswith(
        "Closed: triaged as expected (an intended trade-off) on ")
    assert github.issues[1]["state"] == "closed" and github.issues[1]["state_reason"] == "not_planned"


def test_no_issue_without_issues_true_or_for_an_unconfirmed_change(github, settings, queued, db,
                                                                   django_capture_on_commit_callbacks):
    watch = watch_of("https://github.com/acme/vllm", issues=False)
    confirm(change_point(watch.benchmarks.get()), django_capture_on_commit_callbacks, settings)
    other = watch_of("https://github.com/acme/other", slug="tiny-b")
    settings.BENCH_CONFIRM_REGRESSIONS = True
    cp = change_point(other.benchmarks.get(), confirmation="disagreed")  # its re-run contradicted it
    with django_capture_on_commit_callbacks(execute=True):
        changepoint_mark(change_point=cp, status="false_alarm")
    assert not ForgeIssue.objects.exists() and queued == [] and github.requests == []


def test_bisected_before_it_was_opened_the_body_says_so_and_no_comment(github, settings, queued, db,
                                                                        django_capture_on_commit_callbacks):
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get())
    Bisection.objects.create(benchmark=cp.benchmark, variant=cp.variant, metric=cp.metric, change_point=cp,
                             branch="main", good_commit=SHA_A, bad_commit=SHA_B, commits=[SHA_MID, SHA_B],
                             state=Bisection.State.UNDECIDABLE, message="skipped commits hide the first bad one")
    confirm(cp, django_capture_on_commit_callbacks, settings)
    sync_all(), sync_all()
    [post] = github.calls("POST", API)
    assert "**Bisection:** undecidable: skipped commits hide the first bad one" in post["json"]["body"]
    assert github.calls("POST", "/comments") == [] and github.calls("PATCH", API) == []


def test_a_bisection_that_failed_is_told_as_such(github, settings, queued, db, django_capture_on_commit_callbacks):
    watch = watch_of("https://github.com/acme/vllm")
    cp = change_point(watch.benchmarks.get())
    confirm(cp, django_capture_on_commit_callbacks, settings)
    sync_all()
    bisection = Bisection.objects.create(benchmark=cp.benchmark, variant=cp.variant, metric=cp.metric, change_point=cp,
                                         branch="main", good_commit=SHA_A, bad_commit=SHA_B, commits=[SHA_MID, SHA_B])
    with django_capture_on_commit_callbacks(execute=True):
        bisection_module._finish(bisection, Bisection.State.FAILED, "an end of the range could not be measured")
    sync_all()
    [note] = github.calls("POST", f"{API}/1/comments")
    assert note["json"]["body"] == ("The bisection ended without a first bad commit: failed: an end of the range "
                                    "could not be measured.")
    assert github.issues[1]["state"] == "open"
