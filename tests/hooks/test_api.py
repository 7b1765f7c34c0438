"""The JSON runs API: filters and their errors, and the token-protected trigger."""
import hashlib
import io
import json

import pytest
from django.core.management import call_command

from benchsite.bench.models import Measurement, Run
from benchsite.hooks import services
from benchsite.hooks.models import ApiToken

from .conftest import SHA_A, SHA_B, make_benchmark

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    """tiny-a: eager at SHA_A succeeded at 100 tok/s, compiled at SHA_A failed; tiny-b: eager at SHA_B queued."""
    a, b = make_benchmark("tiny-a"), make_benchmark("tiny-b")
    eager_a, compiled_a = a.variants.all()
    done = Run.objects.create(benchmark=a, variant=eager_a, batch="00000000-0000-0000-0000-000000000001",
                              state="SUCCEEDED", commit=SHA_A, ref="main")
    Measurement.objects.create(run=done, metric="decode_tok_s", value=100.0, unit="tok/s", direction="higher")
    failed = Run.objects.create(benchmark=a, variant=compiled_a, batch=done.batch, state="FAILED", commit=SHA_A,
                                ref="main", error="engine died")
    queued = Run.objects.create(benchmark=b, variant=b.variants.first(), batch="00000000-0000-0000-0000-000000000002",
                                commit=SHA_B, ref="perf/x")
    return {"done": done, "failed": failed, "queued": queued}


def ids(response):
    return sorted(run["id"] for run in response.json()["runs"])


def test_filters_by_commit_prefix_benchmark_and_states(client, runs):
    assert ids(client.get("/api/runs/", {"commit": SHA_A[:7]})) == sorted([runs["done"].id, runs["failed"].id])
    assert ids(client.get("/api/runs/", {"benchmark": "tiny-b"})) == [runs["queued"].id]
    assert ids(client.get("/api/runs/", {"state": "queued,failed"})) == sorted([runs["failed"].id, runs["queued"].id])
    assert ids(client.get("/api/runs/", {"commit": SHA_A, "state": "SUCCEEDED"})) == [runs["done"].id]
    assert ids(client.get("/api/runs/", {"ref": "perf/x"})) == [runs["queued"].id]
    assert len(client.get("/api/runs/").json()["runs"]) == 3


def test_a_run_as_json(client, runs):
    run = runs["done"]
    [data] = client.get("/api/runs/", {"commit": SHA_A, "state": "SUCCEEDED"}).json()["runs"]
    assert data["id"] == run.id
    assert (data["benchmark"], data["variant"], data["commit"], data["ref"], data["state"]) == (
        "tiny-a", "eager", SHA_A, "main", "SUCCEEDED")
    assert data["decode_tok_s"] == 100.0
    assert data["url"] == f"http://testserver/runs/{run.id}/"
    assert data["created_at"] and data["finished_at"] is None


@pytest.mark.parametrize("params, message", [
    ({"commit": "not-hex"}, "not a hexadecimal SHA"),
    ({"commit": "abc"}, "not a hexadecimal SHA"),
    ({"benchmark": "nope"}, "no benchmark with slug 'nope'"),
    ({"state": "DONE"}, "unknown state ['DONE']"),
    ({"limit": "many"}, "not an integer"),
    ({"limit": "0"}, "between 1 and"),
    ({"sha": SHA_A}, "unknown parameters ['sha']"),
])
def test_bad_parameters_are_400_with_a_message(client, runs, params, message):
    response = client.get("/api/runs/", params)
    assert response.status_code == 400
    assert message in response.json()["error"]


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user(username="ci", password="x")
    return services.api_token_create(user=user, name="ci")


def post(client, body, raw_token=None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw_token}"} if raw_token else {}
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post("/api/runs/", data=data, content_type="application/json", **headers, **extra)


def test_post_with_a_token_triggers_the_benchmark_at_a_commit(client, sent, token, django_capture_on_commit_callbacks):
    benchmark = make_benchmark("tiny-a")
    row, raw = token
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, {"benchmark": "tiny-a", "commit": SHA_A.upper(), "variants": ["compiled"]}, raw)
    assert response.status_code == 201, response.content
    [data] = response.json()["runs"]
    run = Run.objects.get(id=data["id"])
    assert (run.benchmark, run.variant.name, run.commit, run.ref, run.trigger, run.triggered_by) == (
        benchmark, "compiled", SHA_A, SHA_A, "api", row.user)
    assert [name for name, _, _ in sent] == ["bench.execute_run"]
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_post_with_a_branch_runs_the_whole_ladder(client, sent, token):
    make_benchmark("tiny-a")
    response = post(client, {"benchmark": "tiny-a", "ref": "perf/fused-rmsnorm"}, token[1])
    assert response.status_code == 201
    assert [(r["variant"], r["ref"], r["commit"]) for r in response.json()["runs"]] == [
        ("eager", "perf/fused-rmsnorm", ""), ("compiled", "perf/fused-rmsnorm", "")]


def test_post_for_the_installed_engine_needs_no_commit_and_takes_none(client, sent, token,
                                                                     django_capture_on_commit_callbacks):
    """A benchmark without a repository runs the worker's installed vLLM (the demo, a GPU host's
    wheelhouse install): it is triggered with no commit or ref, and refuses one."""
    benchmark = make_benchmark("tiny-a")
    benchmark.engine_source = None
    benchmark.save()
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, {"benchmark": "tiny-a", "variants": ["eager"]}, token[1])
    assert response.status_code == 201, response.content
    assert [(r["variant"], r["ref"], r["commit"], r["state"]) for r in response.json()["runs"]] == [
        ("eager", "", "", "QUEUED")]
    assert [name for name, _, _ in sent] == ["bench.execute_run"]
    refused = post(client, {"benchmark": "tiny-a", "ref": "main"}, token[1])
    assert refused.status_code == 400
    assert "runs the installed engine" in refused.json()["error"]
    assert Run.objects.count() == 1


@pytest.mark.parametrize("authorization", [None, "Bearer dbt_not-a-real-token", "Basic Y2k6eA=="])
def test_post_without_a_valid_token_is_401(client, sent, token, authorization):
    make_benchmark("tiny-a")
    extra = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = post(client, {"benchmark": "tiny-a", "commit": SHA_A}, **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert Run.objects.count() == 0


def test_a_revoked_token_is_401(client, sent, token):
    make_benchmark("tiny-a")
    row, raw = token
    assert services.api_tokens_revoke(tokens=ApiToken.objects.filter(id=row.id)) == 1
    response = post(client, {"benchmark": "tiny-a", "commit": SHA_A}, raw)
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("body, status, message", [
    (b"{not json", 400, "not valid JSON"),
    ([1, 2], 400, "send a JSON object"),
    ({"benchmark": "nope", "commit": SHA_A}, 404, "no benchmark with slug 'nope'"),
    ({"benchmark": "tiny-a"}, 400, "give `commit`"),
    ({"benchmark": "tiny-a", "commit": "abc123"}, 400, "not a full 40-character SHA"),
    ({"benchmark": "tiny-a", "ref": "--upload-pack=evil"}, 400, "starts with '-'"),
    ({"benchmark": "tiny-a", "ref": "main", "variants": ["turbo"]}, 400, "has no variants ['turbo']"),
    ({"benchmark": "tiny-a", "ref": "main", "priority": 1}, 400, "unknown fields ['priority']"),
])
def test_bad_trigger_bodies_are_refused_with_a_message(client, sent, token, body, status, message):
    make_benchmark("tiny-a")
    response = post(client, body, token[1])
    assert response.status_code == status
    assert message in response.json()["error"]
    assert Run.objects.count() == 0


def test_only_the_tokens_hash_is_stored_and_the_command_prints_it_once(django_user_model):
    django_user_model.objects.create_user(username="ci", password="x")
    out = io.StringIO()
    call_command("api_token_create", "ci", "ci-vllm", stdout=out)
    raw = out.getvalue().strip()
    row = ApiToken.objects.get(name="ci-vllm")
    assert row.token_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {row.name, row.prefix, row.token_sha256} and raw.startswith(row.prefix)
    assert services.api_token_authenticate(authorization=f"Bearer {raw}") == row
