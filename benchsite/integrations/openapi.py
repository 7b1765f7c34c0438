"""The JSON runs API described as an OpenAPI 3.1 document, served at /api/openapi.json and
used by the fuzz test (tests/security/test_api_fuzz.py) to generate its inputs."""
from benchsite.bench.lifecycle import outcome
from benchsite.bench.models import Run

from .api import MAX_LIMIT
from .openapi_pulls import PULL_SCHEMAS
from .selectors import SHORTEST_PREFIX

_NUMBER = {"type": ["number", "null"]}
_OUTCOME = {"enum": list(outcome.WORST_FIRST), "description": "what the run found (`state` says how it executed): "
            "pending (not finished, or a confirmation is due), incorrect, regressed, improved, passed, "
            "inconclusive (the interval straddles the threshold), not_judged (not enough history), failed"}
_FINAL = {"type": "boolean", "description": "false while a confirmation run or a second look may still change "
          "the outcome: poll until true"}
_VERDICT = {
    "type": "object", "required": ["metric", "effect", "interval", "threshold"],
    "properties": {"metric": {"type": "string"},
                   "effect": {**_NUMBER, "description": "relative change against the baseline, a fraction"},
                   "interval": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2,
                                "maxItems": 2, "description": "95% interval of the effect [lo, hi], fractions"},
                   "threshold": {"type": "number", "description": "the smallest change that counts, a fraction"},
                   "threshold_source": {"type": ["string", "null"], "enum": ["explicit", "floor", "noise", "default", None],
                                        "description": "which bound decided the threshold: explicit (set for the "
                                                       "benchmark), floor (the metric's), noise (1.5 x the series' "
                                                       "noise) or default (the noise not known yet); null before"},
                   "noise": {**_NUMBER, "description": "the series' run-to-run noise between engine starts when "
                                                       "judged, a fraction (relative standard deviation)"},
                   "noise_starts": {"type": ["integer", "null"], "description": "the engine starts the noise "
                                                                               "was estimated from"}},
}
_ERROR = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
_MEASUREMENT = {
    "type": "object", "required": ["point", "metric", "value", "unit", "ci_low", "ci_high"],
    "properties": {"point": {"type": "string", "description": "the workload point's id, e.g. c16-p8192-m256"},
                   "metric": {"type": "string"}, "value": {"type": "number"}, "unit": {"type": "string"},
                   "ci_low": _NUMBER, "ci_high": _NUMBER},
}
_RUN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "benchmark": {"type": "string"}, "variant": {"type": "string"},
        "commit": {"type": "string"}, "ref": {"type": "string"}, "state": {"enum": list(Run.State.values)},
        "branch": {"type": "string", "description": "the branch the run belongs to: a push's, or the ref's when the "
                   "worker resolved a branch; \"\" for none (a commit or tag, the installed engine) or not known yet"},
        "trigger": {"type": "string"},
        "priority": {"enum": [p.name.lower() for p in Run.Priority],
                     "description": "first (a push, pull request, form or API run), confirm (a confirmation "
                     "re-run), background (a bisection step or canary): lower ones wait while their pool has higher"},
        "created_at": {"type": ["string", "null"], "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "finished_at": {"type": ["string", "null"], "format": "date-time"},
        "url": {"type": "string", "format": "uri"},
        "decode_tok_s": {**_NUMBER, "description": "decode tok/s at `point`"},
        "point": {"type": "string", "description": "the workload point decode_tok_s is of: the run's first point "
                  "(c{concurrency}-p{prompt_tokens}-m{max_tokens}[-r{rate}]; p0: the benchmark's prompt text), "
                  "or the one ?point= asks for"},
        "measurements": {"type": "array", "items": _MEASUREMENT,
                         "description": "every figure of the run, at each of its workload points"},
        "error": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"},
                  "description": "the worker's notes of a finished run that are not figures, e.g. a workload point "
                  "skipped because the engine cannot hold it (GET /api/runs/{id}/)"},
        "queue": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Queue"}],
                  "description": "while QUEUED: its place in its pool's queue and whether a worker serves the pool"},
        "outcome": _OUTCOME, "outcome_final": _FINAL,
        "correct": {"type": ["boolean", "null"], "description": "the greedy output's correctness; null: not judged"},
        "verdicts": {"type": "array", "items": _VERDICT},
        "allreduce_share": {**_NUMBER, "description": "allreduce share of a decode step, a fraction"},
        "ceiling_tok_s": {**_NUMBER, "description": "decode tok/s if allreduce were free"},
        "pull_request": {"type": ["integer", "null"],
                         "description": "the number of the pull request whose comparison the run is a side of"},
        "role": {"enum": ["head", "base", None], "description": "which side: the PR's head or its merge base"},
    },
    "required": ["id", "benchmark", "variant", "commit", "ref", "state", "url", "outcome", "outcome_final",
                 "correct", "verdicts", "allreduce_share", "ceiling_tok_s", "pull_request", "role", "point",
                 "measurements"],
}
_COMMIT = {
    "type": "object", "required": ["commit", "outcome", "outcome_final", "runs"],
    "properties": {
        "commit": {"type": "string"},
        "outcome": {**_OUTCOME, "description": "the worst outcome of the commit's own runs and their confirmations "
                    "(bisection and canary runs do not count), in this order: " + ", ".join(outcome.WORST_FIRST)},
        "outcome_final": _FINAL,
        "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}},
    },
}
_QUEUE = {
    "type": "object",
    "properties": {
        "position": {"type": "integer", "minimum": 1, "description": "1: the next run its pool's workers take"},
        "length": {"type": "integer", "minimum": 1}, "pool": {"type": "string"},
        "served": {"type": "boolean", "description": "a worker of the pool was heard from recently"},
        "last_seen_at": {"type": ["string", "null"], "format": "date-time",
                         "description": "when a worker of the pool was last heard from (null: never)"},
        "workers": {"type": "array", "items": {"type": "string"}},
        "message": {"type": "string", "description": 'e.g. "no worker has served pool h200x2 since ..."'},
    },
    "required": ["position", "length", "pool", "served", "last_seen_at", "workers", "message"],
}
_RUNS = {"type": "object", "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}}},
         "required": ["runs"]}


def _json(schema_ref: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": schema_ref}}}}


def _errors(*codes: int) -> dict:
    words = {400: "bad parameters or body", 401: "missing or invalid bearer token", 403: "the token's user is a viewer",
             404: "no such benchmark, commit or pull request", 409: "no worker serves the benchmark's pool (send force: true)",
             429: "rate limited (Retry-After says when to come back)"}
    return {str(c): _json("#/components/schemas/Error", words[c]) for c in codes}


_PULL_GET = {
    "summary": "A pull request's outcome: its latest head's comparisons, their tables and runs",
    "parameters": [
        {"name": "host", "in": "path", "required": True, "schema": {"type": "string"},
         "description": "the repository's host: github.com, gitlab.com, ..."},
        {"name": "repo", "in": "path", "required": True, "schema": {"type": "string"},
         "description": "the repository's path on its host, its slashes as they are: owner/name, group/sub/name"},
        {"name": "number", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},
    ],
    "responses": {"200": _json("#/components/schemas/Pull", "the pull request"), **_errors(401, 404, 429)},
}


# The filters of GET /api/runs/ (api.RUN_FILTERS).
_RUNS_PARAMETERS = [
    {"name": "commit", "in": "query", "schema": {"type": "string", "pattern": "^[0-9a-f]{4,64}$"}},
    {"name": "benchmark", "in": "query", "schema": {"type": "string"}},
    {"name": "state", "in": "query", "description": "comma-separated states",
     "schema": {"type": "string"}},
    {"name": "outcome", "in": "query", "description": "comma-separated outcomes",
     "schema": {"type": "string"}},
    {"name": "ref", "in": "query", "schema": {"type": "string"}},
    {"name": "branch", "in": "query", "description": "the branch the runs belong to (`branch` of a run)",
     "schema": {"type": "string"}},
    {"name": "pull_request", "in": "query", "description": "a pull (merge) request's number: its "
     "comparisons' runs; give repo with it", "schema": {"type": "integer", "minimum": 1}},
    {"name": "repo", "in": "query", "description": "the repository of pull_request, host included: "
     "github.com/owner/name", "schema": {"type": "string"}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
    {"name": "point", "in": "query", "description": "a workload point's id (c16-p8192-m256): "
     "decode_tok_s is that point's (null for a run without it); default each run's first point",
     "schema": {"type": "string", "pattern": "^c\\d+-p\\d+-m\\d+(-r[0-9.e+-]+)?$"}},
]


def openapi_document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "decode-bench runs API", "version": "1"},
        "components": {
            "schemas": {"Run": _RUN, "Queue": _QUEUE, "Runs": _RUNS, "Commit": _COMMIT, "Error": _ERROR,
                        **PULL_SCHEMAS, "Trigger": {
                "type": "object", "additionalProperties": False, "required": ["benchmark"],
                "properties": {"benchmark": {"type": "string", "description": "the benchmark's slug"},
                               "commit": {"type": "string", "pattern": "^[0-9a-fA-F]{40}$"},
                               "ref": {"type": "string", "description": "branch, tag or commit (neither for a benchmark on the installed engine)"},
                               "variants": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                               "repeats": {"type": "integer", "minimum": 1, "maximum": Run.MAX_REPEATS,
                                           "description": "timed repeats per run (omit: the benchmark's)"},
                               "force": {"type": "boolean", "default": False,
                                         "description": "queue even when no worker serves the benchmark's pool "
                                                        "(else 409)"}}}},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {"/api/runs/": {
            "get": {
                "summary": "Runs, newest first",
                "parameters": _RUNS_PARAMETERS,
                "responses": {"200": _json("#/components/schemas/Runs", "the runs"), **_errors(400, 401, 429)},
            },
            "post": {
                "summary": "Trigger a benchmark at a commit or ref (members' tokens)",
                "security": [{"bearer": []}],
                "requestBody": {"required": True,
                                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Trigger"}}}},
                "responses": {"201": _json("#/components/schemas/Runs", "the runs created"),
                              **_errors(400, 401, 403, 404, 409, 429)},
            },
        }, "/api/commits/{sha}/": {
            "get": {
                "summary": "A commit's outcome and the runs that decide it",
                "parameters": [{"name": "sha", "in": "path", "required": True,
                                "description": f"a full SHA or a unique prefix of at least {SHORTEST_PREFIX} characters",
                                "schema": {"type": "string"}}],
                "responses": {"200": _json("#/components/schemas/Commit", "the commit's outcome"),
                              **_errors(400, 401, 404, 429)},
            },
        }, "/api/pulls/{host}/{repo}/{number}/": {"get": _PULL_GET}},
    }
