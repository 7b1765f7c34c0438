"""The OpenAPI document drf-spectacular writes (/api/openapi.json) and the Swagger UI page (/api/docs):
the document is valid, describes everything the hand-written one did, and each JSON answer the API
gave in api_golden/ (test_api_unchanged.py) has a status the document lists for its operation, fits
that status's schema and has exactly the keys the schema names; the page loads only our files."""
import json
import re
from pathlib import Path

import jsonschema
import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.urls import resolve

from benchsite.integrations import api
from benchsite.integrations.serializers import RunFiltersSerializer, TriggerSerializer

pytestmark = pytest.mark.django_db
GOLDEN = Path(__file__).parent / "api_golden"

# What the hand-written document (benchsite/integrations/openapi.py, deleted with the move) described:
# each operation's parameters and answers, each schema's keys and the keys it required.
OLD_OPERATIONS = {
    ("get", "/api/runs/"): (["benchmark", "branch", "commit", "limit", "outcome", "point", "pull_request", "ref", "repo",
                             "state"], ["200", "400", "401", "429"]),
    ("post", "/api/runs/"): ([], ["201", "400", "401", "403", "404", "409", "429"]),
    ("get", "/api/commits/{sha}/"): (["sha"], ["200", "400", "401", "404", "429"]),
    ("get", "/api/pulls/{host}/{repo}/{number}/"): (["host", "number", "repo"], ["200", "401", "404", "429"]),
}
OLD_SCHEMAS = {  # name: (its keys, those it required)
    "Runs": (["runs"], ["runs"]),
    "Run": (["allreduce_share", "benchmark", "branch", "ceiling_tok_s", "commit", "correct", "created_at",
             "decode_tok_s", "error", "finished_at", "id", "measurements", "outcome", "outcome_final", "point",
             "priority", "pull_request", "queue", "ref", "role", "started_at", "state", "trigger", "url", "variant",
             "verdicts"],
            ["allreduce_share", "benchmark", "ceiling_tok_s", "commit", "correct", "id", "measurements", "outcome",
             "outcome_final", "point", "pull_request", "ref", "role", "state", "url", "variant", "verdicts"]),
    "Verdict": (["effect", "interval", "metric", "noise", "noise_starts", "threshold", "threshold_source"],
                ["effect", "interval", "metric", "threshold"]),
    "Measurement": (["ci_high", "ci_low", "metric", "point", "unit", "value"],
                    ["ci_high", "ci_low", "metric", "point", "unit", "value"]),
    "Queue": (["last_seen_at", "length", "message", "pool", "position", "served", "workers"],
              ["last_seen_at", "length", "message", "pool", "position", "served", "workers"]),
    "Commit": (["commit", "outcome", "outcome_final", "runs"], ["commit", "outcome", "outcome_final", "runs"]),
    "Error": (["error"], ["error"]),
    "Trigger": (["benchmark", "commit", "force", "ref", "repeats", "variants"], ["benchmark"]),
    "Pull": (["actions", "base_branch", "comparisons", "earlier", "head_sha", "is_fork", "missing", "number",
              "outcome", "outcome_final", "page", "repo", "state", "title", "url"],
             ["actions", "base_branch", "comparisons", "earlier", "head_sha", "is_fork", "missing", "number",
              "outcome", "outcome_final", "page", "repo", "state", "title", "url"]),
    "PullAction": (["accepted", "actor", "association", "at", "detail", "head_sha", "kind"],
                   ["accepted", "actor", "association", "at", "detail", "head_sha", "kind"]),
    "PullComparison": (["accepted_at", "accepted_by", "benchmark", "created_at", "finished_at", "head_sha", "host",
                        "max_starts_per_side", "merge_base", "outcome", "runs", "starts_per_side", "starts_used",
                        "state", "summary", "table"],
                       ["accepted_at", "accepted_by", "benchmark", "created_at", "finished_at", "head_sha", "host",
                        "max_starts_per_side", "merge_base", "outcome", "runs", "starts_per_side", "starts_used",
                        "state", "summary", "table"]),
    "PullEarlier": (["benchmark", "created_at", "head_sha", "outcome", "state"],
                    ["benchmark", "created_at", "head_sha", "outcome", "state"]),
    "PullRow": (["base", "base_runs", "ci_high", "ci_low", "correctness", "correctness_reason", "decided", "effect",
                 "head", "head_runs", "level", "metric", "metrics", "note", "outcome", "share_base", "share_head",
                 "starts", "threshold", "took_effect", "unit", "variant", "visible_at_cap"], []),
    "PullRunRef": (["id", "role", "round", "state", "url", "variant"], ["id", "role", "round", "state", "url", "variant"]),
}
# What the new document says otherwise, and why.
OLD_DIFFERENCES = {
    ("Run", "notes"): "no answer of /api/runs/ ever had it: it is a key of the run page's own JSON (GET /api/runs/{id}/, "
                      "the page's poll, not this API)",
}


@pytest.fixture(scope="module")
def document(django_db_blocker):
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/openapi.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    return response.json()


def _resolve(document, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rpartition("/")[2]]
    return schema


def test_the_document_is_valid_openapi_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))


def test_the_document_describes_all_the_hand_written_one_did(document):
    for (method, path), (parameters, statuses) in OLD_OPERATIONS.items():
        operation = document["paths"][path][method]
        assert set(parameters) <= {p["name"] for p in operation.get("parameters", [])}, (method, path)
        assert set(statuses) <= set(operation["responses"]), (method, path)
    assert document["paths"]["/api/runs/"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Trigger"}
    schemas = document["components"]["schemas"]
    for name, (keys, required) in OLD_SCHEMAS.items():
        properties = set(schemas[name]["properties"])
        assert set(keys) <= properties, (name, set(keys) - properties)
        assert set(required) <= set(schemas[name].get("required", [])), name
    for (name, key), _why in OLD_DIFFERENCES.items():
        assert key not in schemas[name]["properties"]
    assert schemas["Trigger"]["additionalProperties"] is False
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "an API token (`manage.py api_token_create USER NAME`, or "
                                                           "the admin)"}
    assert document["paths"]["/api/runs/"]["post"]["security"] == [{"bearer": []}]
    assert document["paths"]["/api/runs/"]["get"]["security"] == [{"bearer": []}, {}]


def test_the_documented_inputs_are_the_ones_the_api_reads():
    assert list(RunFiltersSerializer().fields) == list(api.RUN_FILTERS)
    assert list(TriggerSerializer().fields) == list(api.TRIGGER_FIELDS)


def _operation(document, method: str, path: str) -> dict:
    """The operation that answered METHOD PATH (the malformed /api/pulls/ URLs: the pull request's)."""
    route = resolve(path.partition("?")[0]).route
    template = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
    if template == "/^api/pulls/":
        template = "/api/pulls/{host}/{repo}/{number}/"
    return document["paths"][template][method.lower()]


def _keys_documented(document, value, schema, where: str) -> None:
    """Every object in VALUE has only keys its schema names (jsonschema checks the rest)."""
    schema = _resolve(document, schema)
    for branch in schema.get("oneOf", []) + schema.get("allOf", []):
        if value is not None and _resolve(document, branch).get("type") != "null":
            _keys_documented(document, value, branch, where)
    if isinstance(value, dict) and "properties" in schema:
        assert set(value) <= set(schema["properties"]), f"{where}: undocumented {set(value) - set(schema['properties'])}"
        for key, item in value.items():
            _keys_documented(document, item, schema["properties"][key], f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _keys_documented(document, item, schema["items"], f"{where}[{i}]")


def _unmask(body: str) -> str:
    """A masked answer (a new run's id and times) as it was answered."""
    return (body.replace('"id": "<id>"', '"id": 1').replace("/runs/<id>/", "/runs/1/")
            .replace('"<time>"', '"2026-11-02T09:30:00+00:00"'))


GOLDEN_ANSWERS = [(group.stem, name, record["request"], answer)
                  for group in sorted(GOLDEN.glob("*.json"))
                  for name, record in json.loads(group.read_text()).items()
                  for answer in record["answers"] if answer["headers"].get("Content-Type") == "application/json"]


def test_the_golden_answers_cover_every_documented_operation(document):
    answered = {(r["method"].lower(), _operation_path(document, r)) for _, _, r, _ in GOLDEN_ANSWERS}
    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert documented <= answered, documented - answered


def _operation_path(document, request) -> str:
    operation = _operation(document, request["method"], request["path"])
    return next(path for path, operations in document["paths"].items() if operation in operations.values())


@pytest.mark.parametrize("group, name, request_, answer", GOLDEN_ANSWERS,
                         ids=[f"{g}/{n}/{a['status']}" for g, n, _, a in GOLDEN_ANSWERS])
def test_each_json_answer_is_documented(document, group, name, request_, answer):
    operation = _operation(document, request_["method"], request_["path"])
    status = str(answer["status"])
    assert status in operation["responses"], f"{status} is not in the document"
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    body = json.loads(_unmask(answer["body"]))
    jsonschema.validate(body, {**schema, "components": document["components"]})
    _keys_documented(document, body, schema, f"{group}/{name}")


def test_the_docs_page_loads_only_our_files(client, settings):
    settings.BENCH_PRIVATE_DASHBOARD = True  # like /api/openapi.json, public on a private dashboard too
    response = client.get("/api/docs")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "/api/openapi.json" in page
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/static/drf_spectacular_sidecar/swagger-ui-dist/") for s in sources), sources
    assert not re.search(r"https?://", page), "the page names another site"
    for source in sources:
        assert finders.find(source.removeprefix("/static/")), f"{source} is not among our static files"
