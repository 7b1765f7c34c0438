"""Fuzz the JSON runs API from its OpenAPI document (served by the app), on a bounded budget:
schema-shaped and malformed query strings and bodies, with a member's token, a wrong one and
none. The bar: no 5xx, every answer one the document lists, 200/201 bodies match its schemas.
The figures (inputs tried, 5xx found) are printed and kept in var/logs/api-fuzz.json."""
import json
import uuid
from urllib.parse import quote

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, EngineSource, Measurement, Run
from benchsite.integrations import tokens
from benchsite.integrations.models import RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullAction, PullRequest, PullRun
from benchsite.regressions.models import Verdict
from benchsite.regressions.outcomes import outcomes_refresh
from tests.conftest import ROOT

# one xdist worker for the module: the report test reads the counts the fuzz tests kept
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("api-fuzz")]
EXAMPLES = 150  # per operation: about 10 s on the 2-core CI machine
SEEN = {"inputs": 0, "5xx": 0, "statuses": {}}

junk = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)
hexes = st.text("0123456789abcdefABCDEF", min_size=0, max_size=70)
query_values = {
    "commit": st.one_of(hexes, junk), "benchmark": st.one_of(st.just("fuzz"), junk),
    "state": st.one_of(st.sampled_from(["QUEUED", "RUNNING,FAILED", "done", ""]), junk),
    "outcome": st.one_of(st.sampled_from(["incorrect", "passed,pending", "green", ""]), junk),
    "ref": junk, "limit": st.one_of(st.integers(-10, 1000).map(str), junk),
    "pull_request": st.one_of(st.integers(-5, 2 ** 40).map(str), junk),
    "repo": st.one_of(st.sampled_from(["github.com/vllm-project/vllm", "https://github.com/vllm-project/vllm.git",
                                       "gitlab.com/g/s/n", "[::1"]), junk),
}
queries = st.one_of(
    st.fixed_dictionaries({}, optional=query_values),
    st.dictionaries(junk, junk, max_size=3),
)
trigger_objects = st.fixed_dictionaries({}, optional={
    "benchmark": st.one_of(st.just("fuzz"), junk, st.integers(), st.none()),
    "commit": st.one_of(hexes, junk, st.integers()), "ref": st.one_of(st.just("main"), junk, st.lists(junk)),
    "variants": st.one_of(st.lists(st.sampled_from(["eager", "compiled"]) | junk, max_size=3), junk, st.integers()),
    "extra": junk,
})
bodies = st.one_of(trigger_objects.map(lambda d: json.dumps(d).encode()), st.binary(max_size=200),
                   st.recursive(st.none() | st.booleans() | st.integers() | junk,
                                lambda c: st.lists(c, max_size=3) | st.dictionaries(junk, c, max_size=3),
                                max_leaves=8).map(lambda v: json.dumps(v).encode()))


@pytest.fixture
def api(client, settings, django_user_model, monkeypatch):
    settings.BENCH_API_REQUESTS_PER_MIN = 10 ** 6
    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", lambda *a, **k: type("R", (), {"id": "t"})())
    source = EngineSource.objects.create(name="vllm", kind="git", repo_url="https://github.com/vllm-project/vllm.git")
    benchmark = Benchmark.objects.create(name="fuzz", slug="fuzz", model="/m", engine_source=source)
    for name in ("eager", "compiled"):
        trigger.variant_create(benchmark=benchmark, name=name)
    for commit, state in (("abcdef0" + "1" * 33, "SUCCEEDED"), ("abcdef0" + "2" * 33, "FAILED")):  # a shared prefix
        run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.first(), batch=uuid.uuid4(),
                                 state=state, commit=commit)
        Measurement.objects.create(run=run, metric="decode_tok_s", value=50.0)
        Verdict.objects.create(run=run, metric="decode_tok_s", kind="no_change", effect=0.01, ci_low=-0.02,
                               ci_high=0.04, threshold=0.03)
    outcomes_refresh(run_ids=Run.objects.values_list("id", flat=True))
    _pull_request(benchmark, run)
    _, token = tokens.api_token_create(user=django_user_model.objects.create_user("m", password="x"), name="m")
    document = client.get("/api/openapi.json").json()
    return client, token, document


def _pull_request(benchmark, run) -> None:
    """github.com/vllm-project/vllm#1 with a comparison of one run (the fuzz reaches its 200s)."""
    watch = RepoWatch.objects.create(repo_url="https://github.com/vllm-project/vllm", branches=["main"], secret_env="X")
    watch.benchmarks.set([benchmark])
    pull = PullRequest.objects.create(watch=watch, provider="github", repo_key="github.com/vllm-project/vllm",
                                      number=1, base_branch="main", head_sha=run.commit)
    comparison = Comparison.objects.create(pull=pull, benchmark=benchmark, head_sha=run.commit, base_branch="main",
                                           state="done", outcome="passed",
                                           table=[{"variant": "eager", "metric": "decode_tok_s", "base": 50.0}])
    PullRun.objects.create(run=run, comparison=comparison, role="head")
    PullAction.objects.create(pull=pull, kind="/bench", actor="x", accepted=True)


def _check(response, operation: dict, document: dict) -> None:
    SEEN["inputs"] += 1
    SEEN["statuses"][response.status_code] = SEEN["statuses"].get(response.status_code, 0) + 1
    if response.status_code >= 500:
        SEEN["5xx"] += 1
    assert response.status_code < 500, response.content[:500]
    documented = operation["responses"]
    assert str(response.status_code) in documented, f"{response.status_code} is not in the document"
    ref = documented[str(response.status_code)]["content"]["application/json"]["schema"]["$ref"]
    schema = {**document["components"]["schemas"][ref.rsplit("/", 1)[1]], "components": document["components"]}
    jsonschema.validate(response.json(), schema)


_FUZZ = hsettings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@_FUZZ
@given(query=queries)
def test_fuzz_get_runs(api, query):
    client, _, document = api
    _check(client.get("/api/runs/", query), document["paths"]["/api/runs/"]["get"], document)


# Path segments: SHA-like (prefixes of the fixture's commits among them) and junk; never empty nor
# holding "/" (those are other URLs, not this endpoint's answers).
commit_paths = st.one_of(st.sampled_from(["abcdef0", "abcdef01", "abcdef0" + "1" * 33, "abcdef", "ABCDEF02"]), hexes,
                         junk).filter(lambda s: s and "/" not in s and s not in (".", ".."))


@_FUZZ
@given(sha=commit_paths)
def test_fuzz_get_commit(api, sha):
    client, _, document = api
    _check(client.get(f"/api/commits/{quote(sha, safe='')}/"), document["paths"]["/api/commits/{sha}/"]["get"],
           document)


# A pull request's path: host, then the repository's path (slashes kept), then a number.
segments = st.one_of(st.sampled_from(["github.com", "vllm-project", "vllm", "a.b"]), junk).filter(
    lambda s: s.strip("/") and s not in (".", ".."))


pull_paths = st.one_of(
    st.just(("github.com", ["vllm-project", "vllm"], 1)),  # the fixture's PR: its 200 against the schema
    st.tuples(segments, st.lists(segments, min_size=1, max_size=3),
              st.one_of(st.sampled_from([0, 1, 2]), st.integers(-3, 2 ** 70))))


@_FUZZ
@given(where=pull_paths)
def test_fuzz_get_pull(api, where):
    client, _, document = api
    host, repo, number = where
    path = "/".join(quote(s, safe="") for s in (host, *repo))
    response = client.get(f"/api/pulls/{path}/{number}/")
    _check(response, document["paths"]["/api/pulls/{host}/{repo}/{number}/"]["get"], document)


@_FUZZ
@given(body=bodies, auth=st.sampled_from(["member", "wrong", "none", "garbage"]))
def test_fuzz_post_runs(api, body, auth):
    client, token, document = api
    header = {"member": f"Bearer {token}", "wrong": "Bearer bench_nope", "none": None, "garbage": "Basic \x00"}[auth]
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.post("/api/runs/", data=body, content_type="application/json", **extra)
    _check(response, document["paths"]["/api/runs/"]["post"], document)


def test_fuzz_report():
    """Runs last in this module: the figures of the fuzz tests above."""
    report = {"inputs_tried": SEEN["inputs"], "5xx_found": SEEN["5xx"], "statuses": SEEN["statuses"]}
    (ROOT / "var" / "logs").mkdir(parents=True, exist_ok=True)
    (ROOT / "var" / "logs" / "api-fuzz.json").write_text(json.dumps(report))
    print(f"API fuzz: {report}")
    assert SEEN["5xx"] == 0
