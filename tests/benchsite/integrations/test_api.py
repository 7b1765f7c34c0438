"""The JSON runs API: filters and their errors, and the token-protected trigger."""
import hashlib
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from benchsite.bench.worker import pools
from benchsite.bench.models import Measurement, PoolWorker, Run
from benchsite.integrations import tokens
from benchsite.integrations.models import ApiToken

from .conftest import SHA_A, SHA_B, make_benchmark

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    """tiny-a: eager at SHA_A succeeded at 100 tok/s, compiled at SHA_A failed; tiny-b: eager at SHA_B queued."""
    a, b = make_benchmark("tiny-a"), make_benchmark("tiny-b")
    eager_a, compiled_a = a.variants.all()
    done = Run.objects.create(benchmark=a, variant=eager_a, batch="00000000-0000-0000-0000-000000000001",
                              state="SUCCEEDED", commit=SHA_A, ref="main", branch="main")
    Measurement.objects.create(run=done, metric="decode_tok_s", value=100.0, unit="tok/s", direction="higher")
    failed = Run.objects.create(benchmark=a, variant=compiled_a, batch=done.batch, state="FAILED", commit=SHA_A,
                                ref="main", error="engine died")
    queued = Run.objects.create(benchmark=b, variant=b.variants.first(), batch="00000000-0000-0000-0000-000000000002",
                                commit=SHA_B, ref="perf/x", branch="perf/x", priority=Run.Priority.CONFIRM)
    return {"done": done, "failed": failed, "queued": queued}


def ids(response):
    return sorted(run["id"] for run in response.json()["runs"])


def test_filters_by_commit_prefix_benchmark_and_states(client, runs):
    assert ids(client.get("/api/runs/", {"commit": SHA_A[:7]})) == sorted([runs["done"].id, runs["failed"].id])
    assert ids(client.get("/api/runs/", {"benchmark": "tiny-b"})) == [runs["queued"].id]
    assert ids(client.get("/api/runs/", {"state": "queued,failed"})) == sorted([runs["failed"].id, runs["queued"].id])
    assert ids(client.get("/api/runs/", {"commit": SHA_A, "state": "SUCCEEDED"})) == [runs["done"].id]
    assert ids(client.get("/api/runs/", {"ref": "perf/x"})) == [runs["queued"].id]
    assert ids(client.get("/api/runs/", {"branch": "main"})) == [runs["done"].id]
    assert len(client.get("/api/runs/").json()["runs"]) == 3


def test_each_run_says_its_priority(client, runs):
    priorities = {r["id"]: r["priority"] for r in client.get("/api/runs/").json()["runs"]}
    assert priorities == {runs["done"].id: "first", runs["failed"].id: "first", runs["queued"].id: "confirm"}


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
    ({"benchmark": "\x00"}, "parameters ['benchmark'] contain a NUL character"),  # PostgreSQL: DataError
    ({"ref": "main\x00"}, "parameters ['ref'] contain a NUL character"),
])
def test_bad_parameters_are_400_with_a_message(client, runs, params, message):
    response = client.get("/api/runs/", params)
    assert response.status_code == 400
    assert message in response.json()["error"]


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user(username="ci", password="x")
    return tokens.api_token_create(user=user, name="ci")


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
    assert tokens.api_tokens_revoke(tokens=ApiToken.objects.filter(id=row.id)) == 1
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
    ({"benchmark": "tiny-a", "ref": "main", "force": "yes"}, 400, "force='yes': give true or false"),
    ({"benchmark": "\x00"}, 400, "contains a NUL character"),  # PostgreSQL: DataError (found by the fuzz test)
    ({"benchmark": "tiny-a", "ref": "main", "variants": ["eager\x00"]}, 400, "contains a NUL character"),
])
def test_bad_trigger_bodies_are_refused_with_a_message(client, sent, token, body, status, message):
    make_benchmark("tiny-a")
    response = post(client, body, token[1])
    assert response.status_code == status
    assert message in response.json()["error"]
    assert Run.objects.count() == 0


def test_a_trigger_on_a_pool_no_worker_serves_is_409_unless_forced(client, sent, token,
                                                                    django_capture_on_commit_callbacks):
    benchmark = make_benchmark("tiny-a")  # its pool (cpu) is served
    benchmark.gpu_pool = "h200x2"
    benchmark.save()
    refused = post(client, {"benchmark": "tiny-a", "ref": "main"}, token[1])
    assert refused.status_code == 409
    assert refused.json()["error"] == ("no worker has ever served pool h200x2: never seen: the runs would wait until a "
                                       'worker of the pool starts; send "force": true to queue them all the same')
    assert Run.objects.count() == 0 and sent == []

    pools.pool_workers_seen(worker="gpu@h200-host", pools=["h200x2"])
    PoolWorker.objects.filter(pool="h200x2").update(last_seen_at=timezone.now() - timedelta(minutes=10))
    refused = post(client, {"benchmark": "tiny-a", "ref": "main", "force": False}, token[1])
    assert refused.status_code == 409 and "no worker has served pool h200x2 since " in refused.json()["error"]
    assert "(10 min ago)" in refused.json()["error"]

    with django_capture_on_commit_callbacks(execute=True):
        forced = post(client, {"benchmark": "tiny-a", "ref": "main", "force": True}, token[1])
    assert forced.status_code == 201, forced.content
    queues = [run["queue"] for run in forced.json()["runs"]]
    assert [(q["position"], q["length"], q["pool"], q["served"]) for q in queues] == [
        (1, 2, "h200x2", False), (2, 2, "h200x2", False)]
    assert queues[0]["message"].startswith("no worker has served pool h200x2 since ")
    assert [name for name, _, _ in sent] == ["bench.execute_run"] * 2

    pools.pool_workers_seen(worker="gpu@h200-host", pools=["h200x2"])  # the worker is back
    assert post(client, {"benchmark": "tiny-a", "ref": "main"}, token[1]).status_code == 201


def test_openapi_documents_force_the_409_and_the_queue(client):
    document = client.get("/api/openapi.json").json()
    trigger = document["components"]["schemas"]["Trigger"]["properties"]
    assert trigger["force"]["type"] == "boolean"
    assert "409" in document["paths"]["/api/runs/"]["post"]["responses"]
    assert "queue" in document["components"]["schemas"]["Run"]["properties"]
    assert document["components"]["schemas"]["Queue"]["properties"]["message"]["type"] == "string"


def test_only_the_tokens_hash_is_stored_and_the_command_prints_it_once(django_user_model):
    django_user_model.objects.create_user(username="ci", password="x")
    out = io.StringIO()
    call_command("api_token_create", "ci", "ci-vllm", stdout=out)
    raw = out.getvalue().strip()
    row = ApiToken.objects.get(name="ci-vllm")
    assert row.token_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {row.name, row.prefix, row.token_sha256} and raw.startswith(row.prefix)
    assert tokens.api_token_authenticate(authorization=f"Bearer {raw}") == row


# --- outcomes: /api/runs/ and /api/commits/<sha>/ -----------------------------------------


@pytest.fixture
def judged(runs):
    """SHA_A's eager run judged incorrect (though fast) and with verdicts; a compiled run of SHA_A
    failed; SHA_B's queued run; a run of a commit sharing SHA_A's first 8 characters."""
    from benchsite.regressions.models import Verdict
    from benchsite.regressions.outcomes import outcomes_refresh

    done = runs["done"]
    for metric, value in (("correct", 0.0), ("allreduce_share", 0.084778), ("ceiling_tok_s", 381.77)):
        Measurement.objects.create(run=done, metric=metric, value=value)
    Verdict.objects.create(run=done, metric="decode_tok_s", kind="no_change", effect=0.02, ci_low=-0.01, ci_high=0.05,
                           threshold=0.005, threshold_source="floor", noise=0.0008, noise_starts=14)
    Verdict.objects.create(run=done, metric="itl_ms_p50", kind="not_enough_data", threshold=0.03)
    Verdict.objects.create(run=done, metric="correct", kind="regression", threshold=0.0)
    twin = Run.objects.create(benchmark=done.benchmark, variant=done.variant, batch=done.batch, state="SUCCEEDED",
                              commit=SHA_A[:8] + "f" * 32, ref="main")
    outcomes_refresh(run_ids=Run.objects.values_list("id", flat=True))
    return {**runs, "twin": twin}


def test_every_run_says_its_outcome_correctness_verdicts_and_figures(client, judged, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):  # however many runs: a fixed number of queries
        rows = {r["id"]: r for r in client.get("/api/runs/", {"commit": SHA_A}).json()["runs"]}
    done, failed = rows[judged["done"].id], rows[judged["failed"].id]
    assert (done["state"], done["outcome"], done["outcome_final"], done["correct"]) == (
        "SUCCEEDED", "incorrect", True, False)
    assert done["verdicts"] == [
        {"metric": "decode_tok_s", "effect": 0.02, "interval": [-0.01, 0.05], "threshold": 0.005,
         "threshold_source": "floor", "noise": 0.0008, "noise_starts": 14},
        {"metric": "itl_ms_p50", "effect": None, "interval": None, "threshold": 0.03, "threshold_source": None,
         "noise": None, "noise_starts": None},
    ]
    assert (done["allreduce_share"], done["ceiling_tok_s"], done["decode_tok_s"]) == (0.084778, 381.77, 100.0)
    assert (failed["outcome"], failed["outcome_final"], failed["correct"], failed["verdicts"]) == (
        "failed", True, None, [])
    assert failed["allreduce_share"] is None and failed["ceiling_tok_s"] is None
    [queued] = client.get("/api/runs/", {"commit": SHA_B}).json()["runs"]
    assert (queued["outcome"], queued["outcome_final"]) == ("pending", False)
    assert ids(client.get("/api/runs/", {"outcome": "incorrect,failed"})) == sorted(
        [judged["done"].id, judged["failed"].id])
    bad = client.get("/api/runs/", {"outcome": "green"})
    assert bad.status_code == 400 and "unknown outcome ['green']" in bad.json()["error"]


def test_a_commit_by_sha_or_unique_prefix(client, judged):
    data = client.get(f"/api/commits/{SHA_A}/").json()
    assert (data["commit"], data["outcome"], data["outcome_final"]) == (SHA_A, "incorrect", True)
    assert [r["id"] for r in data["runs"]] == [judged["done"].id, judged["failed"].id]
    assert data["runs"][0]["outcome"] == "incorrect" and data["runs"][1]["outcome"] == "failed"
    queued = client.get(f"/api/commits/{SHA_B[:7]}/").json()
    assert (queued["commit"], queued["outcome"], queued["outcome_final"]) == (SHA_B, "pending", False)
    assert client.get(f"/api/commits/{SHA_A[:9].upper()}/").json()["commit"] == SHA_A


@pytest.mark.parametrize("sha, status, message", [
    (SHA_A[:8], 400, f"commit prefix {SHA_A[:8]} is ambiguous: it names {SHA_A[:12]}, {SHA_A[:8]}ffff"),
    (SHA_A[:6], 400, "give a full SHA or a prefix of at least 7 hexadecimal characters"),
    ("zzzzzzzz", 400, "is not a commit"),
    ("c" * 40, 404, f"no run of commit {'c' * 40}"),
])
def test_a_commit_unknown_ambiguous_or_too_short_is_refused_with_the_reason(client, judged, sha, status, message):
    response = client.get(f"/api/commits/{sha}/")
    assert response.status_code == status
    assert message in response.json()["error"]


def test_bisection_and_canary_runs_decide_no_commit(client, judged):
    from benchsite.regressions.models import Bisection, BisectStep

    probe = judged["twin"]
    bisection = Bisection.objects.create(benchmark=probe.benchmark, variant=probe.variant, metric="decode_tok_s",
                                         branch="main", good_commit=SHA_B, bad_commit=SHA_A)
    BisectStep.objects.create(bisection=bisection, commit=probe.commit, run=probe)
    response = client.get(f"/api/commits/{probe.commit}/")
    assert response.status_code == 404 and "only bisection or canary runs" in response.json()["error"]


def test_the_openapi_document_describes_the_new_keys_and_the_commit_endpoint(client, judged):
    import jsonschema

    document = client.get("/api/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert {"outcome", "outcome_final", "correct", "verdicts", "allreduce_share", "ceiling_tok_s"} <= set(
        schemas["Run"]["required"])
    assert schemas["Run"]["properties"]["outcome"]["enum"] == [
        "incorrect", "regressed", "failed", "pending", "inconclusive", "not_judged", "improved", "passed"]
    operation = document["paths"]["/api/commits/{sha}/"]["get"]
    assert set(operation["responses"]) == {"200", "400", "401", "404", "429"}
    for url, name in ((f"/api/commits/{SHA_A}/", "Commit"), ("/api/runs/", "Runs")):
        jsonschema.validate(client.get(url).json(), {**schemas[name], "components": document["components"]})
