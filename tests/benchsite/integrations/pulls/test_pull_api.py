"""The JSON API of pull requests: the runs filter, /api/pulls/..., their errors and the OpenAPI document."""
import jsonschema
import pytest

from benchsite.integrations import tokens
from benchsite.integrations.pulls.models import Comparison

from .pull_scene import BASE, H1, H2, ROW, pull_scene

pytestmark = pytest.mark.django_db
API = "/api/pulls/github.com/acme/vllm/12/"


@pytest.fixture
def scene():
    return pull_scene()


def _validate(client, body, name):
    document = client.get("/api/openapi.json").json()
    jsonschema.validate(body, {**document["components"]["schemas"][name], "components": document["components"]})


def test_the_runs_of_a_pull_request_say_their_side(client, scene, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):  # however many runs: a fixed number of queries
        response = client.get("/api/runs/", {"pull_request": "12", "repo": "github.com/acme/vllm"})
    runs = {r["id"]: r for r in response.json()["runs"]}
    assert set(runs) == {scene.base_run.id, scene.head_run.id, scene.running.pull_runs.get().run_id}
    assert (runs[scene.head_run.id]["pull_request"], runs[scene.head_run.id]["role"]) == (12, "head")
    assert (runs[scene.base_run.id]["pull_request"], runs[scene.base_run.id]["role"]) == (12, "base")
    other = next(r for r in client.get("/api/runs/", {"commit": H1}).json()["runs"] if r["id"] == scene.other_run.id)
    assert (other["pull_request"], other["role"]) == (None, None)
    _validate(client, response.json(), "Runs")


def test_the_repo_may_be_given_as_its_url(client, scene):
    response = client.get("/api/runs/", {"pull_request": "12", "repo": "https://github.com/Acme/vllm.git"})
    assert len(response.json()["runs"]) == 3
    assert client.get("/api/runs/", {"pull_request": "13", "repo": "github.com/acme/vllm"}).json()["runs"] == []


def test_a_commits_runs_say_their_pull_request_too(client, scene):
    runs = client.get(f"/api/commits/{H2}/").json()["runs"]
    assert [(r["id"], r["pull_request"], r["role"]) for r in runs] == [(scene.head_run.id, 12, "head")]


@pytest.mark.parametrize("params, message", [
    ({"pull_request": "12"}, "give pull_request and repo together"),
    ({"repo": "github.com/acme/vllm"}, "give pull_request and repo together"),
    ({"pull_request": "twelve", "repo": "github.com/acme/vllm"}, "pull_request='twelve' is not a pull"),
    ({"pull_request": "-1", "repo": "github.com/acme/vllm"}, "is not a pull or merge request number"),
    ({"pull_request": "99999999999", "repo": "github.com/acme/vllm"}, "is not a pull or merge request number"),
    ({"pull_request": "12", "repo": "acme"}, "repo='acme'"),
    ({"pull_request": "12", "repo": "[::1"}, "repo='[::1'"),
])
def test_pull_request_filter_errors(client, scene, params, message):
    response = client.get("/api/runs/", params)
    assert response.status_code == 400 and message in response.json()["error"]


def test_a_pull_request_as_json(client, scene):
    data = client.get(API).json()
    assert {k: data[k] for k in ("repo", "number", "title", "url", "state", "head_sha", "base_branch", "is_fork")} == {
        "repo": "github.com/acme/vllm", "number": 12, "title": "Fuse RMSNorm into the GEMM",
        "url": "https://github.com/acme/vllm/pull/12", "state": "open", "head_sha": H2, "base_branch": "main",
        "is_fork": True}
    assert (data["outcome"], data["outcome_final"], data["missing"]) == ("pending", False, [])
    assert data["page"] == "http://testserver/pr/github.com/acme/vllm/12/"
    done, running = data["comparisons"]
    assert (done["benchmark"], done["state"], done["outcome"], done["merge_base"], done["host"]) == (
        "tiny-a", "done", "passed", BASE, "gpu-7")
    assert done["table"][0]["base"] == ROW["base"] and done["table"][0]["head_runs"] == [scene.head_run.id]
    assert done["runs"] == [
        {"id": scene.base_run.id, "role": "base", "variant": "eager", "state": "SUCCEEDED", "round": 1,
         "url": f"http://testserver/runs/{scene.base_run.id}/"},
        {"id": scene.head_run.id, "role": "head", "variant": "eager", "state": "SUCCEEDED", "round": 1,
         "url": f"http://testserver/runs/{scene.head_run.id}/"}]
    assert (done["starts_per_side"], done["starts_used"]) == (scene.latest.starts_per_side, {"base": 1, "head": 1})
    assert (running["benchmark"], running["state"], running["outcome"]) == ("tiny-b", "running", "pending")
    assert [(e["head_sha"], e["benchmark"], e["state"], e["outcome"]) for e in data["earlier"]] == [
        (H1, "tiny-b", "cancelled", "not_judged"), (H1, "tiny-a", "done", "regressed")]
    assert [(a["kind"], a["actor"], a["association"], a["accepted"]) for a in data["actions"]] == [
        ("/bench", "mallory", "NONE", False), ("label", "carol", "MEMBER", True)]
    _validate(client, data, "Pull")


def test_the_outcome_is_final_once_every_comparison_of_the_head_is_done(client, scene):
    Comparison.objects.filter(pk=scene.running.pk).update(state="done", outcome="improved")
    data = client.get(API).json()
    assert (data["outcome"], data["outcome_final"]) == ("improved", True)
    Comparison.objects.filter(pk=scene.latest.pk).update(outcome="regressed")
    assert client.get(API).json()["outcome"] == "regressed"


def test_a_pull_request_with_nothing_to_compare_has_no_outcome(client, scene):
    scene.pull.watch.benchmarks.clear()
    Comparison.objects.filter(head_sha=H2).delete()
    data = client.get(API).json()
    assert (data["outcome"], data["outcome_final"], data["comparisons"]) == (None, False, [])
    _validate(client, data, "Pull")


def test_an_unknown_pull_request_is_a_json_404(client, scene):
    for path in ("/api/pulls/github.com/acme/vllm/13/", "/api/pulls/gitlab.com/acme/vllm/12/",
                 "/api/pulls/github.com/acme/vllm/99999999999999999999/", "/api/pulls/github.com/acme/vllm/0/",
                 "/api/pulls/github.com/acme/vllm/twelve/", "/api/pulls/github.com/12/", "/api/pulls/a%0Ab/c/1/",
                 "/api/pulls/github.com/acme/vl%00lm/12/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "no pull request" in response.json()["error"] or "names no pull request" in response.json()["error"]


def test_a_private_dashboard_takes_a_token(client, scene, settings, django_user_model):
    settings.BENCH_PRIVATE_DASHBOARD = True
    response = client.get(API)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    _, raw = tokens.api_token_create(user=django_user_model.objects.create_user("bot", password="x"), name="ci")
    assert client.get(API, HTTP_AUTHORIZATION=f"Bearer {raw}").json()["number"] == 12
    runs = client.get("/api/runs/", {"pull_request": "12", "repo": "github.com/acme/vllm"},
                      HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert len(runs.json()["runs"]) == 3


def test_the_pull_api_is_rate_limited_like_the_rest(client, scene, settings):
    settings.BENCH_API_REQUESTS_PER_MIN = 2
    statuses = [client.get(API, REMOTE_ADDR="10.9.8.7").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_the_openapi_document_describes_the_pull_request_forms(client):
    document = client.get("/api/openapi.json").json()
    parameters = {p["name"] for p in document["paths"]["/api/runs/"]["get"]["parameters"]}
    assert {"pull_request", "repo"} <= parameters
    assert {"pull_request", "role"} <= set(document["components"]["schemas"]["Run"]["required"])
    operation = document["paths"]["/api/pulls/{host}/{repo}/{number}/"]["get"]
    assert set(operation["responses"]) == {"200", "401", "404", "429"}
    jsonschema.Draft202012Validator.check_schema({**document["components"]["schemas"]["Pull"],
                                                  "components": document["components"]})
