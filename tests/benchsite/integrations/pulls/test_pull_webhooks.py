"""Signed pull-request deliveries: which start a comparison (base, head, base, head on one host,
the base at the merge base the worker resolves), which wait for a maintainer, which are refused
or ignored, and what supersedes and cancels. Tasks are recorded, not sent."""
import json
import uuid

import pytest

from benchsite.bench.models import Run
from benchsite.integrations.models import Comparison, PullAction, PullRequest, WebhookDelivery
from benchsite.integrations.pulls.tasks import REPORT_TASK
from benchsite.regressions.outcomes import commit_runs

from ..conftest import SECRET_ENV, sign
from .events import (HEAD, HEAD2, github_check_run, github_comment, github_pull_request, gitlab_merge_request,
                     gitlab_note)


@pytest.fixture
def deliver(client, sent, django_capture_on_commit_callbacks):
    def post(payload, event="pull_request", *, provider="github", delivery=None, body=None):
        body = json.dumps(payload).encode() if body is None else body
        if provider == "github":
            headers = {"HTTP_X_GITHUB_EVENT": event, "HTTP_X_GITHUB_DELIVERY": delivery or str(uuid.uuid4()),
                       "HTTP_X_HUB_SIGNATURE_256": sign(body)}
        else:
            headers = {"HTTP_X_GITLAB_EVENT": event, "HTTP_X_GITLAB_TOKEN": "s3cret-for-tests",
                       "HTTP_IDEMPOTENCY_KEY": delivery or str(uuid.uuid4())}
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(f"/webhooks/{provider}/", data=body, content_type="application/json", **headers)
    return post


def _executions(sent):
    return [(args[0], options.get("queue")) for name, args, options in sent if name == "bench.execute_run"]


def _reports(sent):
    return [args[0] for name, args, _ in sent if name == REPORT_TASK]


def test_opened_queues_base_and_head_interleaved_on_one_host_per_benchmark(watched, deliver, sent):
    response = deliver(github_pull_request("opened"))
    assert response.status_code == 202, response.content
    assert "against its merge base with main" in response.json()["detail"]
    comparisons = list(Comparison.objects.order_by("benchmark__slug"))
    assert [c.benchmark.slug for c in comparisons] == ["tiny-a", "tiny-b"]
    first = comparisons[0]
    assert first.head_sha == HEAD and first.base_branch == "main" and first.host == "test-host"
    assert first.starts_per_side == 2 and first.state == Comparison.State.QUEUED
    runs = [p.run for p in first.pull_runs.order_by("run_id")]
    # base (both variants), head, base, head: 2 starts a side of each variant
    assert [p.role for p in first.pull_runs.order_by("run_id")] == ["base", "base", "head", "head"] * 2
    assert all(r.trigger == Run.Trigger.PULL and r.ref == HEAD and r.branch == "" for r in runs)
    assert {(r.commit, r.merge_base_with) for r in runs if r.pull_run.role == "base"} == {("", "main")}
    assert {(r.commit, r.merge_base_with) for r in runs if r.pull_run.role == "head"} == {(HEAD, "")}
    sent_runs = _executions(sent)
    assert [run_id for run_id, _ in sent_runs[:8]] == [r.id for r in runs]  # in that order
    assert {queue for _, queue in sent_runs} == {"gpu.cpu.host.test-host"}
    assert sorted(_reports(sent)) == sorted(c.id for c in comparisons)  # the queued check runs
    pull = PullRequest.objects.get()
    assert (pull.repo_key, pull.number, pull.is_fork, pull.head_sha) == ("github.com/vllm-project/vllm", 12, False, HEAD)
    # the worker is told to resolve the merge base
    from benchsite.bench.lifecycle.dispatch import run_spec
    assert run_spec(runs[0])["engine"]["merge_base_with"] == "main"
    # never a commit's outcome nor a branch's history
    assert commit_runs(HEAD) == []


def test_a_new_push_supersedes_the_queued_runs_of_the_old_head(watched, deliver, sent):
    deliver(github_pull_request("opened"))
    old = list(Comparison.objects.all())
    response = deliver(github_pull_request("synchronize", head=HEAD2))
    assert response.status_code == 202
    assert len(response.json()["cancelled"]) == 16 and "cancelled 16 queued run(s)" in response.json()["detail"]
    for comparison in old:
        comparison.refresh_from_db()
        assert comparison.state == Comparison.State.CANCELLED and "superseded" in comparison.summary
        assert set(Run.objects.filter(pull_run__comparison=comparison).values_list("state", flat=True)) == {"CANCELLED"}
    assert set(Comparison.objects.filter(state="queued").values_list("head_sha", flat=True)) == {HEAD2}
    assert set(_reports(sent)) >= {c.id for c in old}  # their check runs are concluded cancelled


def test_closed_cancels_the_queued_runs(watched, deliver):
    deliver(github_pull_request("opened"))
    response = deliver(github_pull_request("closed", merged=True))
    assert response.status_code == 200 and "merged: cancelled 16 queued run(s)" in response.json()["detail"]
    assert not Run.objects.filter(state="QUEUED").exists()
    assert PullRequest.objects.get().state == "merged"


def test_a_draft_is_skipped_unless_the_watch_takes_drafts(watched, deliver):
    response = deliver(github_pull_request("opened", draft=True))
    assert response.status_code == 200 and "is a draft" in response.json()["detail"]
    assert not Run.objects.exists()
    watched.pull_requests = {"drafts": True, "starts_per_side": 1}
    watched.save()
    response = deliver(github_pull_request("synchronize", draft=True))
    assert response.status_code == 202 and Run.objects.count() == 8


def test_with_a_label_only_labelled_prs_run_and_adding_it_starts_one(watched, deliver):
    watched.pull_requests = {"label": "perf", "starts_per_side": 1}
    watched.save()
    response = deliver(github_pull_request("opened"))
    assert response.status_code == 200 and "no label 'perf'" in response.json()["detail"]
    assert deliver(github_pull_request("labeled", labels=["bug"], label="bug")).json()["detail"].startswith(
        "label 'bug' is not the watch's label")
    response = deliver(github_pull_request("labeled", labels=["perf"], label="perf", sender="maintainer"))
    assert response.status_code == 202 and Run.objects.count() == 8
    action = PullAction.objects.get(kind="label")
    assert (action.actor, action.accepted, action.head_sha) == ("maintainer", True, HEAD)


def test_a_fork_waits_for_a_maintainer_until_a_member_labels_it(watched, deliver, sent):
    watched.pull_requests = {"label": "perf", "starts_per_side": 1}
    watched.save()
    response = deliver(github_pull_request("opened", fork=True, labels=["perf"]))  # a label set earlier
    assert response.status_code == 200 and "waiting for a maintainer" in response.json()["detail"]
    assert not Run.objects.exists()
    waiting = Comparison.objects.get(benchmark__slug="tiny-a")
    assert waiting.state == Comparison.State.WAITING and "waiting for a maintainer" in waiting.summary
    assert waiting.id in _reports(sent)  # the check says so
    response = deliver(github_pull_request("labeled", fork=True, labels=["perf"], label="perf", sender="maintainer"))
    assert response.status_code == 202 and Run.objects.count() == 8
    waiting.refresh_from_db()
    assert waiting.state == Comparison.State.CANCELLED  # replaced by the running one
    # new commits from the fork need a new approval
    response = deliver(github_pull_request("synchronize", fork=True, head=HEAD2, labels=["perf"]))
    assert "waiting for a maintainer" in response.json()["detail"]
    assert not Run.objects.filter(state="QUEUED").exists()


def test_bench_comment_from_a_member_runs_a_fork_and_from_others_is_refused_with_the_reason(watched, deliver):
    deliver(github_pull_request("opened", fork=True))
    response = deliver(github_comment("/bench", association="CONTRIBUTOR", user="mallory"), "issue_comment")
    assert response.status_code == 200
    assert response.json()["detail"] == ("refused: /bench from mallory (author_association CONTRIBUTOR): only "
                                         "members, owners and collaborators may ask")
    assert not Run.objects.exists()
    response = deliver(github_comment("/bench\nplease", association="MEMBER", user="bob"), "issue_comment")
    assert response.status_code == 202 and Run.objects.count() == 16
    actions = list(PullAction.objects.order_by("at").values_list("actor", "association", "accepted", "head_sha"))
    assert actions == [("mallory", "CONTRIBUTOR", False, HEAD), ("bob", "MEMBER", True, HEAD)]


def test_comments_and_others_check_events_are_ignored_with_200(watched, deliver):
    deliver(github_pull_request("opened"))
    before = Run.objects.count()
    for payload, event in ((github_comment("looks good"), "issue_comment"),
                           (github_comment("/bench", on_pull=False), "issue_comment"),
                           (github_check_run("completed"), "check_run"),
                           (github_check_run(name="CI / build"), "check_run"),
                           ({"action": "completed", "check_suite": {"id": 1}, "repository": github_comment()["repository"]},
                            "check_suite")):
        response = deliver(payload, event)
        assert response.status_code == 200, (event, response.content)
    assert Run.objects.count() == before


def test_our_check_runs_re_run_button_starts_it_again(watched, deliver):
    deliver(github_pull_request("opened"))
    comparison = Comparison.objects.get(benchmark__slug="tiny-a")
    response = deliver(github_check_run(external_id=str(comparison.id)), "check_run")
    assert response.status_code == 202
    assert PullAction.objects.get(kind="rerequested").actor == "carol"
    response = deliver(github_check_run(external_id="999999"), "check_run")
    assert "names no comparison" in response.json()["detail"]


@pytest.mark.parametrize("breakage, message", [
    (lambda p: p["pull_request"]["head"].pop("sha"), "pull_request.head.sha is missing or not a full commit SHA"),
    (lambda p: p["pull_request"]["head"].update(sha="abc"), "pull_request.head.sha is missing or not a full commit"),
    (lambda p: p["pull_request"].update(number="12"), "pull_request.number is not a pull request number"),
    (lambda p: p.pop("pull_request"), "a pull_request delivery without `pull_request`"),
])
def test_a_malformed_pull_request_gets_400_and_queues_nothing(watched, deliver, breakage, message):
    payload = github_pull_request("opened")
    breakage(payload)
    response = deliver(payload)
    assert response.status_code == 400 and message in response.json()["detail"]
    assert not Run.objects.exists() and not PullRequest.objects.exists()


def test_a_comment_too_long_gets_400(watched, deliver):
    deliver(github_pull_request("opened", draft=True))
    response = deliver(github_comment("/bench " + "x" * 70000), "issue_comment")
    assert response.status_code == 400 and "over GitHub's 65536" in response.json()["detail"]


def test_a_repeated_delivery_queues_nothing_and_an_unwatched_repository_gets_404(watched, deliver):
    assert deliver(github_pull_request("opened"), delivery="d-1").status_code == 202
    again = deliver(github_pull_request("opened"), delivery="d-1")
    assert again.status_code == 200 and "duplicate delivery" in again.json()["detail"]
    assert Run.objects.count() == 16
    other = github_pull_request("opened")
    other["repository"] = {"clone_url": "https://github.com/someone/else.git"}
    assert deliver(other).status_code == 404


def test_pull_request_checks_can_be_turned_off(watched, deliver):
    watched.pull_requests = False
    watched.save()
    response = deliver(github_pull_request("opened"))
    assert response.status_code == 200 and "checks are off" in response.json()["detail"]


def test_the_github_apps_webhook_secret_verifies_its_own_deliveries(watched, deliver, client, settings, monkeypatch):
    settings.BENCH_GITHUB_APP_WEBHOOK_SECRET = "app-secret"
    body = json.dumps(github_check_run("completed")).encode()
    response = client.post("/webhooks/github/", data=body, content_type="application/json",
                           HTTP_X_GITHUB_EVENT="check_run", HTTP_X_GITHUB_DELIVERY="d-app",
                           HTTP_X_HUB_SIGNATURE_256=sign(body, "app-secret"))
    assert response.status_code == 200 and "not ours to act on" in response.json()["detail"]
    response = client.post("/webhooks/github/", data=body, content_type="application/json",
                           HTTP_X_GITHUB_EVENT="check_run", HTTP_X_GITHUB_DELIVERY="d-bad",
                           HTTP_X_HUB_SIGNATURE_256=sign(body, "wrong"))
    assert response.status_code == 403


@pytest.fixture
def gitlab_watched(db, monkeypatch):
    from benchsite.integrations.models import RepoWatch
    from ..conftest import SECRET, make_benchmark

    monkeypatch.setenv(SECRET_ENV, SECRET)
    watch = RepoWatch.objects.create(repo_url="https://gitlab.com/group/sub/vllm", branches=["main"],
                                     secret_env=SECRET_ENV, pull_requests={"starts_per_side": 1, "label": None})
    watch.benchmarks.set([make_benchmark("tiny-gl", "https://gitlab.com/group/sub/vllm.git")])
    return watch


def test_gitlab_merge_requests_open_update_note_and_close(gitlab_watched, deliver):
    response = deliver(gitlab_merge_request("open"), "Merge Request Hook", provider="gitlab")
    assert response.status_code == 202, response.content
    pull = PullRequest.objects.get()
    assert (pull.repo_key, pull.number, pull.provider) == ("gitlab.com/group/sub/vllm", 3, "gitlab")
    # an update without new commits (a title edit) starts nothing; one with them supersedes
    assert deliver(gitlab_merge_request("update"), "Merge Request Hook", provider="gitlab").status_code == 200
    response = deliver(gitlab_merge_request("update", head=HEAD2, oldrev=HEAD), "Merge Request Hook", provider="gitlab")
    assert response.status_code == 202 and "cancelled 4" in response.json()["detail"]
    assert deliver(gitlab_note("/bench", head=HEAD2), "Note Hook", provider="gitlab").status_code == 202
    response = deliver(gitlab_merge_request("merge", head=HEAD2), "Merge Request Hook", provider="gitlab")
    assert "merged" in response.json()["detail"] and not Run.objects.filter(state="QUEUED").exists()


def test_a_gitlab_fork_takes_the_label_not_a_note(gitlab_watched, deliver):
    gitlab_watched.pull_requests = {"label": "perf", "starts_per_side": 1}
    gitlab_watched.save()
    assert "waiting for a maintainer" in deliver(gitlab_merge_request("open", fork=True, labels=["perf"]),
                                                 "Merge Request Hook", provider="gitlab").json()["detail"]
    assert "refused" in deliver(gitlab_note("/bench"), "Note Hook", provider="gitlab").json()["detail"]
    response = deliver(gitlab_merge_request("update", fork=True, labels=["perf"], previous_labels=[]),
                       "Merge Request Hook", provider="gitlab")
    assert response.status_code == 202
    assert WebhookDelivery.objects.filter(event="Merge Request Hook", status_code=202).exists()
