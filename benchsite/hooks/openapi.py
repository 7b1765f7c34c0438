"""The JSON runs API described as an OpenAPI 3.1 document, served at /api/openapi.json and
used by the fuzz test (tests/security/test_api_fuzz.py) to generate its inputs."""
from benchsite.bench.models import Run

from .api import MAX_LIMIT

_ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
_RUN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "benchmark": {"type": "string"}, "variant": {"type": "string"},
        "commit": {"type": "string"}, "ref": {"type": "string"}, "state": {"enum": list(Run.State.values)},
        "trigger": {"type": "string"}, "created_at": {"type": ["string", "null"], "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "finished_at": {"type": ["string", "null"], "format": "date-time"},
        "url": {"type": "string", "format": "uri"}, "decode_tok_s": {"type": ["number", "null"]},
        "error": {"type": "string"},
    },
    "required": ["id", "benchmark", "variant", "commit", "ref", "state", "url"],
}
_RUNS = {"type": "object", "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}},
         "required": ["runs"]}


def _json(schema_ref: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": schema_ref}}}}


def _errors(*codes: int) -> dict:
    words = {400: "bad parameters or body", 401: "missing or invalid bearer token", 403: "the token's user is a viewer",
             404: "no such benchmark", 429: "rate limited (Retry-After says when to come back)"}
    return {str(c): _json("#/components/schemas/Error", words[c]) for c in codes}


def openapi_document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "decode-bench runs API", "version": "1"},
        "components": {
            "schemas": {"Run": _RUN, "Runs": _RUNS, "Error": _ERROR, "Trigger": {
                "type": "object", "additionalProperties": False, "required": ["benchmark"],
                "properties": {"benchmark": {"type": "string", "description": "the benchmark's slug"},
                               "commit": {"type": "string", "pattern": "^[0-9a-fA-F]{40}$"},
                               "ref": {"type": "string", "description": "branch, tag or commit (neither for a benchmark on the installed engine)"},
                               "variants": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                               "repeats": {"type": "integer", "minimum": 1, "maximum": Run.MAX_REPEATS,
                                           "description": "timed repeats per run (omit: the benchmark's)"}}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {"/api/runs/": {
            "get": {
                "summary": "Runs, newest first",
                "parameters": [
                    {"name": "commit", "in": "query", "schema": {"type": "string", "pattern": "^[0-9a-f]{4,64}$"}},
                    {"name": "benchmark", "in": "query", "schema": {"type": "string"}},
                    {"name": "state", "in": "query", "description": "comma-separated states",
                     "schema": {"type": "string"}},
                    {"name": "ref", "in": "query", "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
                ],
                "responses": {"200": _json("#/components/schemas/Runs", "the runs"), **_errors(400, 401, 429)},
            },
            "post": {
                "summary": "Trigger a benchmark at a commit or ref (members' tokens)",
                "security": [{"bearer": []}],
                "requestBody": {"required": True,
                                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Trigger"}}}},
                "responses": {"201": _json("#/components/schemas/Runs", "the runs created"),
                              **_errors(400, 401, 403, 404, 429)},
            },
        }},
    }
