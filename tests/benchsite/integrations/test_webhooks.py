"""Signed deliveries over HTTP to the running app (live server): verification, dedupe, what a
push queues and cancels, and the refusals."""
import json
import uuid

import httpx
import pytest

from benchsite.bench.lifecycle import claim, trigger
from benchsite.bench.models import Run
from benchsite.integrations.models import WebhookDelivery

from .conftest import SECRET, SECRET_ENV, SHA_A, SHA_B, SHA_C, github_push, sign

pytestmark = pytest.mark.django_db(transaction=True)


def deliver(live_server, payload=None, *, event="push", body=None, signature=None, delivery=None, headers=None):
    body = json.dumps(payload).encode() if body is None else body
    sent_headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(body) if signature is None else signature,
        **(headers or {}),
    }
    sent_headers = {k: v for k, v in sent_headers.items() if v != ""}
    return httpx.post(f"{live_server.url}/webhooks/github/", content=body, headers=sent_headers, timeout=30)


def test_push_on_watched_branch_queues_one_batch_per_benchmark_at_the_head_commit(live_server, watched, sent):
    response = deliver(live_server, github_push(after=SHA_A), delivery="d-1")
    assert response.status_code == 202, response.text
    runs = Run.objects.order_by("id")
    assert [(r.benchmark.slug, r.variant.name) for r in runs] == [
        ("tiny-a", "eager"), ("tiny-a", "compiled"), ("tiny-b", "eager"), ("tiny-b", "compiled")]
    assert {(r.state, r.trigger, r.commit, r.ref) for r in runs} == {("QUEUED", "webhook", SHA_A, "main")}
    assert len({r.batch for r in runs}) == 2
    assert sorted(response.json()["runs"]) == [r.id for r in runs]
    assert [name for name, _, _ in sent] == ["bench.execute_run"] * 4
    stored = WebhookDelivery.objects.get(delivery_id="d-1")
    assert (stored.status_code, stored.accepted, stored.event, stored.branch, stored.commit) == (
        202, True, "push", "main", SHA_A)
    assert sorted(stored.runs.values_list("id", flat=True)) == [r.id for r in runs]
    assert stored.headers["X-Github-Event"] == "push"
    assert not any("signature" in name.lower() for name in stored.headers)
    assert SECRET not in stored.body and SECRET not in json.dumps(stored.headers)


def test_a_repeated_delivery_id_is_answered_duplicate_and_queues_nothing(live_server, watched, sent):
    payload = github_push(after=SHA_A)
    assert deliver(live_server, payload, delivery="same").status_code == 202
    again = deliver(live_server, payload, delivery="same")
    assert again.status_code == 200
    assert "duplicate" in again.json()["detail"]
    assert Run.objects.count() == 4
    assert WebhookDelivery.objects.filter(delivery_id="same").count() == 2  # both stored, one accepted
    assert WebhookDelivery.objects.filter(delivery_id="same", accepted=True).count() == 1


def test_a_refused_attempt_does_not_make_the_redelivery_a_duplicate(live_server, watched, sent):
    payload = github_push(after=SHA_A)
    assert deliver(live_server, payload, delivery="retry-me", signature="sha256=" + "0" * 64).status_code == 403
    assert deliver(live_server, payload, delivery="retry-me").status_code == 202
    assert Run.objects.count() == 4


def test_ping_is_answered_once_verified(live_server, watched, sent):
    response = deliver(live_server, {"zen": "Keep it logically awesome.", "hook_id": 1,
                                     "repository": github_push()["repository"]}, event="ping")
    assert response.status_code == 200
    assert response.json()["detail"].startswith("pong")
    assert Run.objects.count() == 0


@pytest.mark.parametrize("signature, status, reason", [
    ("", 401, "missing X-Hub-Signature-256"),
    ("sha256=" + "0" * 64, 403, "does not match"),
    ("sha1=" + "0" * 40, 403, "does not match"),
])
def test_missing_or_wrong_signature_is_refused_and_queues_nothing(live_server, watched, sent, signature, status,
                                                                   reason):
    response = deliver(live_server, github_push(), signature=signature)
    assert response.status_code == status
    assert reason in response.json()["detail"]
    assert Run.objects.count() == 0 and sent == []
    assert WebhookDelivery.objects.get().status_code == status


def test_signed_with_another_secret_is_refused(live_server, watched, sent):
    body = json.dumps(github_push()).encode()
    response = deliver(live_server, body=body, signature=sign(body, "not-the-secret"))
    assert response.status_code == 403
    assert Run.objects.count() == 0


def test_watch_without_its_secret_in_the_environment_refuses(live_server, watched, sent, monkeypatch):
    monkeypatch.delenv(SECRET_ENV)
    response = deliver(live_server, github_push())
    assert response.status_code == 403
    assert "no secret is configured" in response.json()["detail"]
    assert SECRET_ENV not in response.text  # the server's configuration stays on the server
    assert Run.objects.count() == 0


def test_unknown_repository_is_404_with_the_reason(live_server, watched, sent):
    response = deliver(live_server, github_push(repo="https://github.com/someone/else"))
    assert response.status_code == 404
    assert "no watch for repository github.com/someone/else" in response.json()["detail"]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("payload, reason", [
    (github_push(ref="refs/tags/v0.33.0"), "tag push 'v0.33.0'"),
    (github_push(deleted=True, after="0" * 40), "branch 'main' deleted"),
    (github_push(ref="refs/heads/feature/x"), "matches no watched pattern"),
])
def test_tags_deletions_and_unwatched_branches_get_2xx_with_a_reason(live_server, watched, sent, payload, reason):
    response = deliver(live_server, payload)
    assert response.status_code == 200
    assert reason in response.json()["detail"]
    assert Run.objects.count() == 0 and sent == []


def test_other_events_are_acknowledged_and_ignored(live_server, watched, sent):
    response = deliver(live_server, {"action": "opened", "repository": github_push()["repository"]},
                       event="issues")
    assert response.status_code == 200
    assert "not acted on" in response.json()["detail"]
    assert Run.objects.count() == 0


def test_newer_push_cancels_queued_runs_of_that_branch_only(live_server, watched, sent):
    deliver(live_server, github_push(after=SHA_A))
    first = list(Run.objects.filter(commit=SHA_A))
    claim.run_claim(run_id=first[0].id, task_id="t", worker_host="gpu-1")  # already running: left alone
    deliver(live_server, github_push(ref="refs/heads/perf/fused", after=SHA_C))
    benchmark = first[0].benchmark
    by_hand = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM, ref="main")  # not a push's
    (confirmation,) = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.SCHEDULE, commit=SHA_A,
                                            ref=SHA_A, variants=[first[0].variant], priority=Run.Priority.CONFIRM)

    response = deliver(live_server, github_push(after=SHA_B))

    assert response.status_code == 202
    states = {r.id: r.state for r in Run.objects.all()}
    assert states[first[0].id] == "BUILDING"
    assert {states[r.id] for r in first[1:]} == {"CANCELLED"}
    assert sorted(response.json()["cancelled"]) == sorted(r.id for r in first[1:])
    assert {r.state for r in Run.objects.filter(commit=SHA_C)} == {"QUEUED"}  # another branch
    assert {states[r.id] for r in by_hand} == {"QUEUED"}
    assert {r.state for r in Run.objects.filter(commit=SHA_B)} == {"QUEUED"}
    # A confirmation of the earlier push is held (its pool has pushes to run), not superseded.
    confirmation.refresh_from_db()
    assert (confirmation.state, confirmation.sent_at) == ("QUEUED", None)
    assert confirmation.id not in [args[0] for _, args, _ in sent]


def test_malformed_json_is_400_and_stored(live_server, watched, sent):
    response = deliver(live_server, body=b'{"ref": "refs/heads/main", ')
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]
    assert Run.objects.count() == 0
    assert WebhookDelivery.objects.get().status_code == 400


def test_push_without_a_full_head_sha_is_400(live_server, watched, sent):
    response = deliver(live_server, github_push(after="abc123"))
    assert response.status_code == 400
    assert Run.objects.count() == 0


def test_body_over_5_mib_is_413_and_a_3_mib_push_is_accepted(live_server, watched, sent):
    big = json.dumps(github_push(padding="x" * (5 * 1024 * 1024))).encode()
    response = deliver(live_server, body=big)
    assert response.status_code == 413
    assert Run.objects.count() == 0
    assert WebhookDelivery.objects.get().body == ""
    # Over Django's 2.5 MB DATA_UPLOAD_MAX_MEMORY_SIZE, under our limit: a real push this size is taken.
    sizable = json.dumps(github_push(padding="x" * (3 * 1024 * 1024))).encode()
    assert deliver(live_server, body=sizable).status_code == 202
    assert Run.objects.count() == 4
    assert WebhookDelivery.objects.get(status_code=202).body_truncated is True


def test_form_encoded_delivery_is_verified_over_the_raw_body(live_server, watched, sent):
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(github_push(after=SHA_B))}).encode()
    response = deliver(live_server, body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 202
    assert {r.commit for r in Run.objects.all()} == {SHA_B}


# --- GitLab -----------------------------------------------------------------------------------


def gitlab_push(*, event="Push Hook", ref="refs/heads/main", after=SHA_A, token=SECRET, live_server=None,
                project="https://github.com/vllm-project/vllm.git"):
    payload = {"object_kind": "tag_push" if event == "Tag Push Hook" else "push", "ref": ref, "before": "0" * 40,
               "after": after, "checkout_sha": after,
               "project": {"path_with_namespace": "vllm-project/vllm", "git_http_url": project,
                           "web_url": project.removesuffix(".git")}}
    headers = {"Content-Type": "application/json", "X-Gitlab-Event": event,
               "X-Gitlab-Event-UUID": str(uuid.uuid4()), "X-Gitlab-Token": token}
    headers = {k: v for k, v in headers.items() if v}
    return httpx.post(f"{live_server.url}/webhooks/gitlab/", json=payload, headers=headers, timeout=30)


def test_gitlab_push_with_the_token_queues_the_same_watch(live_server, watched, sent):
    response = gitlab_push(live_server=live_server, after=SHA_B)
    assert response.status_code == 202, response.text
    assert {(r.commit, r.ref, r.trigger) for r in Run.objects.all()} == {(SHA_B, "main", "webhook")}
    stored = WebhookDelivery.objects.get()
    assert stored.provider == "gitlab" and "X-Gitlab-Token" not in stored.headers


@pytest.mark.parametrize("token, status", [("", 401), ("wrong-token", 403)])
def test_gitlab_without_the_right_token_is_refused(live_server, watched, sent, token, status):
    assert gitlab_push(live_server=live_server, token=token).status_code == status
    assert Run.objects.count() == 0


def test_gitlab_tag_push_and_branch_deletion_queue_nothing(live_server, watched, sent):
    tag = gitlab_push(live_server=live_server, event="Tag Push Hook", ref="refs/tags/v1")
    deleted = gitlab_push(live_server=live_server, after="0" * 40)
    assert (tag.status_code, deleted.status_code) == (200, 200)
    assert "tag push" in tag.json()["detail"] and "deleted" in deleted.json()["detail"]
    assert Run.objects.count() == 0
