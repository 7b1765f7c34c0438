"""The schemas of /api/pulls/{host}/{repo}/{number}/ in the OpenAPI document (openapi.py)."""
from benchsite.bench.lifecycle import outcome

_WORDS = list(outcome.WORST_FIRST)
_STATES = ["waiting", "queued", "running", "done", "cancelled"]
_NUMBER = {"type": ["number", "null"]}
_WHEN = {"type": ["string", "null"], "format": "date-time"}

_ROW = {
    "type": "object",
    "description": "one variant of a comparison: base and head of its metric, and head/base - 1 with its interval "
                   "(at `level`)",
    "properties": {
        "variant": {"type": "string"}, "outcome": {"type": "string"}, "metric": {"type": "string"},
        "unit": {"type": "string"}, "base": _NUMBER, "head": _NUMBER,
        "effect": {**_NUMBER, "description": "head/base - 1, a fraction"}, "ci_low": _NUMBER, "ci_high": _NUMBER,
        "threshold": _NUMBER, "correctness": {"type": "string"}, "correctness_reason": {"type": "string"},
        "share_base": {**_NUMBER, "description": "allreduce share of a decode step, a fraction"},
        "share_head": _NUMBER, "took_effect": {"type": "string"},
        "base_runs": {"type": "array", "items": {"type": "integer"}},
        "head_runs": {"type": "array", "items": {"type": "integer"}}, "note": {"type": "string"},
        "starts": {"type": "object", "description": "engine starts each side used for this row",
                   "properties": {"base": {"type": "integer"}, "head": {"type": "integer"}}},
        "level": {**_NUMBER, "description": "the intervals' two-sided level: Pocock's per-look level for the check's "
                  "looks, 0.99 over all of them (0.99 for a single look)"},
        "decided": {"type": "boolean", "description": "false: another start a side could still settle it"},
        "visible_at_cap": {**_NUMBER, "description": "when the change is smaller than what the check can see with "
                           "its most starts a side: the smallest change it finds 19 times in 20 then; else null"},
        "metrics": {"type": "array", "items": {"type": "object"}, "description": "every judged metric's change: "
                    "metric, unit, base, head, effect, ci_low, ci_high, threshold, word, evidence, noise "
                    "({relative, starts}: the series' noise pooled into the interval, or null), decided, and "
                    "spread (the standard deviation of one start's logarithm the interval used)"},
    },
}
_RUN_REF = {
    "type": "object", "required": ["id", "role", "variant", "state", "round", "url"],
    "properties": {"id": {"type": "integer"}, "role": {"enum": ["head", "base"]}, "variant": {"type": "string"},
                   "state": {"type": "string"},
                   "round": {"type": "integer", "description": "the engine start of its side it was (1, 2, ...)"},
                   "url": {"type": "string", "format": "uri"}},
}
_COMPARISON = {
    "type": "object",
    "required": ["benchmark", "head_sha", "merge_base", "state", "outcome", "summary", "table", "host", "created_at",
                 "finished_at", "starts_per_side", "max_starts_per_side", "starts_used", "accepted_by", "accepted_at",
                 "runs"],
    "properties": {
        "benchmark": {"type": "string"}, "head_sha": {"type": "string"},
        "merge_base": {"type": "string", "description": "what the base runs measured; \"\" until the worker resolves it"},
        "state": {"enum": _STATES, "description": "waiting: a fork's PR waits for a maintainer (the label or a /bench "
                  "comment); cancelled: superseded by a newer push, or the PR closed"},
        "outcome": {"enum": _WORDS, "description": "pending until done (never a pass); a cancelled one: not_judged"},
        "summary": {"type": "string"}, "table": {"type": "array", "items": {"$ref": "#/components/schemas/PullRow"}},
        "host": {"type": "string"}, "created_at": _WHEN, "finished_at": _WHEN,
        "starts_per_side": {"type": "integer", "description": "engine starts a side it began with"},
        "max_starts_per_side": {"type": "integer", "description": "the most starts a side it may add up to while "
                                "its result is undecided (docs/methods/sensitivity.md, adaptive starts)"},
        "starts_used": {"type": "object", "required": ["base", "head"], "description": "engine starts a side "
                        "queued so far", "properties": {"base": {"type": "integer"}, "head": {"type": "integer"}}},
        "accepted_by": {"type": ["string", "null"], "description": "who marked its slowdown as intended with the "
                        "check run's Accept (its check then concludes neutral); null when nobody did"},
        "accepted_at": _WHEN,
        "runs": {"type": "array", "items": {"$ref": "#/components/schemas/PullRunRef"}},
    },
}
_EARLIER = {
    "type": "object", "required": ["head_sha", "benchmark", "state", "outcome", "created_at"],
    "properties": {"head_sha": {"type": "string"}, "benchmark": {"type": "string"}, "state": {"enum": _STATES},
                   "outcome": {"enum": _WORDS}, "created_at": _WHEN},
}
_ACTION = {
    "type": "object", "required": ["kind", "actor", "association", "accepted", "detail", "head_sha", "at"],
    "properties": {"kind": {"type": "string", "description": "label, /bench, rerequested, Add starts, Accept, ..."},
                   "actor": {"type": "string"}, "association": {"type": "string"}, "accepted": {"type": "boolean"},
                   "detail": {"type": "string", "description": "why it was refused, or what it started"},
                   "head_sha": {"type": "string"}, "at": _WHEN},
}
_PULL = {
    "type": "object",
    "required": ["repo", "number", "title", "url", "state", "head_sha", "base_branch", "is_fork", "outcome",
                 "outcome_final", "missing", "page", "comparisons", "earlier", "actions"],
    "properties": {
        "repo": {"type": "string", "description": "host/owner/name"}, "number": {"type": "integer"},
        "title": {"type": "string"}, "url": {"type": "string"}, "state": {"enum": ["open", "closed", "merged"]},
        "head_sha": {"type": "string"}, "base_branch": {"type": "string"}, "is_fork": {"type": "boolean"},
        "outcome": {"enum": [*_WORDS, None], "description": "the worst outcome of the latest head's comparisons "
                    "(one per benchmark), in this order: " + ", ".join(_WORDS) + "; a comparison waiting, queued, "
                    "running or not made yet counts as pending; null: nothing to compare"},
        "outcome_final": {"type": "boolean", "description": "false while a comparison of the head is under way or "
                          "still to come: poll until true"},
        "missing": {"type": "array", "items": {"type": "string"},
                    "description": "benchmarks of the watch with no comparison at this head"},
        "page": {"type": "string", "format": "uri", "description": "the PR's page on this service"},
        "comparisons": {"type": "array", "items": {"$ref": "#/components/schemas/PullComparison"}},
        "earlier": {"type": "array", "items": {"$ref": "#/components/schemas/PullEarlier"},
                    "description": "earlier pushes' comparisons and superseded ones, newest first"},
        "actions": {"type": "array", "items": {"$ref": "#/components/schemas/PullAction"},
                    "description": "approvals, /bench requests, re-runs and refusals, newest first"},
    },
}
PULL_SCHEMAS = {"Pull": _PULL, "PullComparison": _COMPARISON, "PullRow": _ROW, "PullRunRef": _RUN_REF,
                "PullEarlier": _EARLIER, "PullAction": _ACTION}
