"""The PR page and /api/pulls/ over comparisons the webhook handling made: a PR of the
repository itself queued, then a fork's PR waiting for a maintainer."""
import json
import uuid

import pytest

from ..conftest import sign
from .events import HEAD, github_pull_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def deliver(client, sent, django_capture_on_commit_callbacks):
    def post(payload):
        body = json.dumps(payload).encode()
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/webhooks/github/", data=body, content_type="application/json",
                               HTTP_X_GITHUB_EVENT="pull_request", HTTP_X_GITHUB_DELIVERY=str(uuid.uuid4()),
                               HTTP_X_HUB_SIGNATURE_256=sign(body))
    return post


def test_a_queued_pull_request_reads_pending_with_its_runs(client, watched, deliver):
    assert deliver(github_pull_request("opened")).status_code == 202
    data = client.get("/api/pulls/github.com/vllm-project/vllm/12/").json()
    assert (data["outcome"], data["outcome_final"], data["head_sha"]) == ("pending", False, HEAD)
    assert [c["benchmark"] for c in data["comparisons"]] == ["tiny-a", "tiny-b"]
    assert [r["role"] for r in data["comparisons"][0]["runs"]].count("head") == 4  # 2 starts x 2 variants
    runs = client.get("/api/runs/", {"pull_request": 12, "repo": "github.com/vllm-project/vllm"}).json()["runs"]
    assert len(runs) == 16 and {r["role"] for r in runs} == {"head", "base"}
    page = client.get("/pr/github.com/vllm-project/vllm/12/").content.decode()
    assert "Fuse the allreduce" in page and page.count("/compare/?a=") == 8  # per benchmark: 2 variants x 2 rounds


def test_a_fork_waiting_for_a_maintainer(client, watched, deliver):
    assert deliver(github_pull_request("opened", number=13, fork=True)).status_code == 200
    data = client.get("/api/pulls/github.com/vllm-project/vllm/13/").json()
    assert (data["outcome"], data["outcome_final"], data["is_fork"]) == ("pending", False, True)
    assert {c["state"] for c in data["comparisons"]} == {"waiting"}
    page = client.get("/pr/github.com/vllm-project/vllm/13/").content.decode()
    assert "waiting for a maintainer" in page and "outcome-pending" in page
