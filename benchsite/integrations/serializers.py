"""The JSON API's requests and answers as typed schemas, from which drf-spectacular writes the
OpenAPI document (/api/openapi.json).

The views answer with the dicts selectors.py builds, rendered as they are: these serializers
describe them, and test_api_schemas.py checks that every answer has exactly the keys described,
of the types described. (Serializing a hundred runs field by field would cost the page tens of
milliseconds.) The inputs are read by api.py, whose messages are the API's; the parameters and
fields below are the same ones (test_api_schemas.py checks that too).

Where a field is what a GPU worker's message carries (runners/messages.py), its schema is that
message's: the document says what the contract says."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers as s

from benchsite.bench.lifecycle import outcome
from benchsite.bench.models import Run
from runners import messages

from .api import MAX_LIMIT
from .pulls.models import Comparison, PullRequest, PullRun
from .selectors import SHORTEST_PREFIX

OUTCOMES = list(outcome.WORST_FIRST)
COMPARISON_STATES = list(Comparison.State.values)
ROLES = list(PullRun.Role.values)


def contract_field(message: type[messages.WorkerMessage], name: str, *, item: bool = False) -> dict:
    """The JSON Schema of MESSAGE's field NAME (ITEM: of one of its items), without its title."""
    schema = message.model_json_schema()["properties"][name]
    schema = schema["items"] if item else schema
    return {key: value for key, value in schema.items() if key != "title"}


@extend_schema_field(contract_field(messages.Claim, "run_id"))
class RunIdField(s.IntegerField):
    pass


@extend_schema_field(contract_field(messages.JobFailure, "error"))
class RunErrorField(s.CharField):
    pass


@extend_schema_field(contract_field(messages.Heartbeat, "pools", item=True))
class PoolField(s.CharField):
    pass


@extend_schema_field(contract_field(messages.Heartbeat, "worker"))
class WorkerField(s.CharField):
    pass


def _number(description: str = "", **extra) -> s.FloatField:
    return s.FloatField(allow_null=True, help_text=description or None, **extra)


def _when(description: str = "") -> s.DateTimeField:
    return s.DateTimeField(allow_null=True, help_text=description or None)


# --- GET /api/runs/ -----------------------------------------------------------------------

class RunFiltersSerializer(s.Serializer):
    """The query parameters of GET /api/runs/ (api.RUN_FILTERS); any other is refused (400)."""
    commit = s.RegexField(r"^[0-9a-fA-F]{4,64}$", required=False, allow_blank=True,
                          help_text="a commit SHA or a prefix of it (4 to 64 hexadecimal characters)")
    benchmark = s.CharField(required=False, allow_blank=True, help_text="a benchmark's slug")
    state = s.CharField(required=False, allow_blank=True, help_text="comma-separated states: " + ", ".join(Run.State.values))
    outcome = s.CharField(required=False, allow_blank=True, help_text="comma-separated outcomes: " + ", ".join(OUTCOMES))
    ref = s.CharField(required=False, allow_blank=True, help_text="the ref the runs were asked for (a branch, tag or commit)")
    branch = s.CharField(required=False, allow_blank=True, help_text="the branch the runs belong to (`branch` of a run)")
    pull_request = s.IntegerField(required=False, min_value=1, max_value=2 ** 31 - 1,
                                  help_text="a pull (merge) request's number: its comparisons' runs; give repo with it")
    repo = s.CharField(required=False, allow_blank=True, help_text="the repository of pull_request, host included "
                                                 "(github.com/owner/name), or its URL")
    limit = s.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=100,
                           help_text="the most runs to answer, newest first")
    point = s.RegexField(r"^c\d{1,4}-p\d{1,8}-m\d{1,8}(-r[0-9.e+-]{1,24})?$", required=False, allow_blank=True,
                         help_text="a workload point's id (c16-p8192-m256): decode_tok_s is that point's (null for a "
                                   "run without it); default each run's first point")


class VerdictSerializer(s.Serializer):
    """A metric of the run judged against its series' baseline (the first workload point's)."""
    metric = s.CharField()
    effect = _number("relative change against the baseline, a fraction")
    interval = s.ListField(child=s.FloatField(), min_length=2, max_length=2, allow_null=True,
                           help_text="95% interval of the effect [lo, hi], fractions")
    threshold = s.FloatField(help_text="the smallest change that counts, a fraction")
    threshold_source = s.ChoiceField(["explicit", "floor", "noise", "default"], allow_null=True, help_text=(
        "which bound decided the threshold: explicit (set for the benchmark), floor (the metric's), noise (1.5 x the "
        "series' noise) or default (the noise not known yet); null before"))
    noise = _number("the series' run-to-run noise between engine starts when judged, a fraction (relative "
                    "standard deviation)")
    noise_starts = s.IntegerField(allow_null=True, help_text="the engine starts the noise was estimated from")


class MeasurementSerializer(s.Serializer):
    """One figure of the run at one of its workload points, as its worker measured it."""
    point = s.CharField(help_text="the workload point's id, e.g. c16-p8192-m256")
    metric = s.CharField(help_text="the metric's name (runners.contract.METRICS), e.g. decode_tok_s")
    value = s.FloatField()
    unit = s.CharField()
    ci_low = _number("the low end of the figure's interval")
    ci_high = _number("the high end of the figure's interval")


class QueueSerializer(s.Serializer):
    """A queued run's place in its pool's queue, and who serves the pool."""
    position = s.IntegerField(min_value=1, help_text="1: the next run its pool's workers take")
    length = s.IntegerField(min_value=1)
    pool = PoolField(help_text="the GPU pool (queue gpu.<pool>)")
    served = s.BooleanField(help_text="a worker of the pool was heard from recently")
    last_seen_at = _when("when a worker of the pool was last heard from (null: never)")
    workers = s.ListField(child=WorkerField(), help_text="the workers heard from recently")
    message = s.CharField(help_text='e.g. "no worker has served pool h200x2 since ..."')


class RunSerializer(s.Serializer):
    id = RunIdField()
    benchmark = s.CharField(help_text="the benchmark's slug")
    variant = s.CharField()
    commit = s.CharField(help_text="the full SHA that ran (\"\" until the worker resolves `ref`)")
    ref = s.CharField()
    branch = s.CharField(help_text="the branch the run belongs to: a push's, or the ref's when the worker resolved "
                                   "a branch; \"\" for none (a commit or tag, the installed engine) or not known yet")
    state = s.ChoiceField(Run.State.values)
    trigger = s.ChoiceField(Run.Trigger.values)
    priority = s.ChoiceField([p.name.lower() for p in Run.Priority], help_text=(
        "first (a push, pull request, form or API run), confirm (a confirmation re-run), background (a bisection "
        "step or canary): lower ones wait while their pool has higher"))
    created_at = s.DateTimeField()
    started_at = _when()
    finished_at = _when()
    url = s.URLField(help_text="the run's page")
    decode_tok_s = _number("decode tok/s at `point`")
    point = s.CharField(help_text="the workload point decode_tok_s is of: the run's first point "
                                  "(c{concurrency}-p{prompt_tokens}-m{max_tokens}[-r{rate}]; p0: the benchmark's prompt "
                                  "text), or the one ?point= asks for")
    measurements = MeasurementSerializer(many=True, help_text="every figure of the run, at each of its workload points")
    error = RunErrorField()
    queue = QueueSerializer(allow_null=True, help_text="while QUEUED: its place in its pool's queue and whether a "
                                                       "worker serves the pool; else null")
    outcome = s.ChoiceField(OUTCOMES, help_text=(
        "what the run found (`state` says how it executed): pending (not finished, or a confirmation is due), "
        "incorrect, regressed, improved, passed, inconclusive (the interval straddles the threshold), not_judged "
        "(not enough history), failed"))
    outcome_final = s.BooleanField(help_text="false while a confirmation run or a second look may still change the "
                                             "outcome: poll until true")
    correct = s.BooleanField(allow_null=True, help_text="the greedy output's correctness; null: not judged")
    verdicts = VerdictSerializer(many=True)
    allreduce_share = _number("allreduce share of a decode step, a fraction")
    ceiling_tok_s = _number("decode tok/s if allreduce were free")
    pull_request = s.IntegerField(allow_null=True, help_text="the number of the pull request whose comparison the "
                                                             "run is a side of")
    role = s.ChoiceField(ROLES, allow_null=True, help_text="which side: the PR's head or its merge base")


class RunsSerializer(s.Serializer):
    runs = RunSerializer(many=True)


# --- POST /api/runs/ ----------------------------------------------------------------------

class TriggerSerializer(s.Serializer):
    """What to run (api.trigger_request_parse reads it); any other field is refused (400)."""
    benchmark = s.CharField(help_text="the benchmark's slug")
    commit = s.RegexField(r"^[0-9a-fA-F]{40}$", required=False, help_text="a full SHA")
    ref = s.CharField(required=False, allow_blank=True, help_text="a branch, tag or commit the worker resolves (neither commit nor ref "
                                                "for a benchmark on the installed engine)")
    variants = s.ListField(child=s.CharField(), min_length=1, required=False,
                           help_text="the variants' names (omit: every variant of the benchmark)")
    repeats = s.IntegerField(min_value=1, max_value=Run.MAX_REPEATS, required=False,
                             help_text="timed repeats per run (omit: the benchmark's)")
    force = s.BooleanField(default=False, help_text="queue even when no worker serves the benchmark's pool (else 409)")


# --- GET /api/commits/{sha}/ -------------------------------------------------------------

class CommitSerializer(s.Serializer):
    commit = s.CharField(help_text="the full SHA")
    outcome = s.ChoiceField(OUTCOMES, help_text=(
        "the worst outcome of the commit's own runs and their confirmations (bisection and canary runs do not "
        "count), in this order: " + ", ".join(OUTCOMES)))
    outcome_final = s.BooleanField(help_text="false while a confirmation run or a second look may still change the "
                                             "outcome: poll until true")
    runs = RunSerializer(many=True)


COMMIT_SHA = (f"a full SHA or a unique prefix of at least {SHORTEST_PREFIX} hexadecimal characters")


# --- GET /api/pulls/{host}/{repo}/{number}/ ----------------------------------------------

class PullStartsSerializer(s.Serializer):
    base = s.IntegerField()
    head = s.IntegerField()


class PullRowSerializer(s.Serializer):
    """One variant of a comparison: base and head of its metric, and head/base - 1 with its interval
    (at `level`). Rows are kept as the comparison wrote them: an older one may lack a key."""
    variant = s.CharField(required=False)
    outcome = s.CharField(required=False)
    metric = s.CharField(required=False)
    unit = s.CharField(required=False)
    base = _number(required=False)
    head = _number(required=False)
    effect = _number("head/base - 1, a fraction", required=False)
    ci_low = _number(required=False)
    ci_high = _number(required=False)
    threshold = _number(required=False)
    correctness = s.CharField(required=False)
    correctness_reason = s.CharField(required=False)
    share_base = _number("allreduce share of a decode step, a fraction", required=False)
    share_head = _number(required=False)
    took_effect = s.CharField(required=False)
    base_runs = s.ListField(child=s.IntegerField(), required=False)
    head_runs = s.ListField(child=s.IntegerField(), required=False)
    note = s.CharField(required=False)
    starts = PullStartsSerializer(required=False, help_text="engine starts each side used for this row")
    level = _number("the intervals' two-sided level: Pocock's per-look level for the check's looks, 0.99 over all "
                    "of them (0.99 for a single look)", required=False)
    decided = s.BooleanField(required=False, help_text="false: another start a side could still settle it")
    visible_at_cap = _number("when the change is smaller than what the check can see with its most starts a side: "
                             "the smallest change it finds 19 times in 20 then; else null", required=False)
    metrics = s.ListField(child=s.DictField(), required=False, help_text=(
        "every judged metric's change: metric, unit, base, head, effect, ci_low, ci_high, threshold, word, evidence, "
        "noise ({relative, starts}: the series' noise pooled into the interval, or null), decided, and spread (the "
        "standard deviation of one start's logarithm the interval used)"))


class PullRunRefSerializer(s.Serializer):
    id = RunIdField()
    role = s.ChoiceField(ROLES)
    variant = s.CharField()
    state = s.ChoiceField(Run.State.values)
    round = s.IntegerField(help_text="the engine start of its side it was (1, 2, ...)")
    url = s.URLField(help_text="the run's page")


class PullComparisonSerializer(s.Serializer):
    benchmark = s.CharField()
    head_sha = s.CharField()
    merge_base = s.CharField(help_text="what the base runs measured; \"\" until the worker resolves it")
    state = s.ChoiceField(COMPARISON_STATES, help_text=(
        "waiting: a fork's PR waits for a maintainer (the label or a /bench comment); cancelled: superseded by a "
        "newer push, or the PR closed"))
    outcome = s.ChoiceField(OUTCOMES, help_text="pending until done (never a pass); a cancelled one: not_judged")
    summary = s.CharField()
    table = PullRowSerializer(many=True)
    host = s.CharField()
    created_at = _when()
    finished_at = _when()
    starts_per_side = s.IntegerField(help_text="engine starts a side it began with")
    max_starts_per_side = s.IntegerField(help_text="the most starts a side it may add up to while its result is "
                                                   "undecided (docs/methods/sensitivity.md, adaptive starts)")
    accepted_by = s.CharField(allow_null=True, help_text="who marked its slowdown as intended with the check run's "
                                                         "Accept (its check then concludes neutral); null when nobody did")
    accepted_at = _when()
    starts_used = PullStartsSerializer(help_text="engine starts a side queued so far")
    runs = PullRunRefSerializer(many=True)


class PullEarlierSerializer(s.Serializer):
    head_sha = s.CharField()
    benchmark = s.CharField()
    state = s.ChoiceField(COMPARISON_STATES)
    outcome = s.ChoiceField(OUTCOMES)
    created_at = _when()


class PullActionSerializer(s.Serializer):
    kind = s.CharField(help_text="label, /bench, rerequested, Add starts, Accept, ...")
    actor = s.CharField()
    association = s.CharField()
    accepted = s.BooleanField()
    detail = s.CharField(help_text="why it was refused, or what it started")
    head_sha = s.CharField()
    at = _when()


class PullSerializer(s.Serializer):
    repo = s.CharField(help_text="host/owner/name")
    number = s.IntegerField()
    title = s.CharField()
    url = s.CharField()
    state = s.ChoiceField(PullRequest.State.values)
    head_sha = s.CharField()
    base_branch = s.CharField()
    is_fork = s.BooleanField()
    outcome = s.ChoiceField(OUTCOMES, allow_null=True, help_text=(
        "the worst outcome of the latest head's comparisons (one per benchmark), in this order: "
        + ", ".join(OUTCOMES) + "; a comparison waiting, queued, running or not made yet counts as pending; null: "
        "nothing to compare"))
    outcome_final = s.BooleanField(help_text="false while a comparison of the head is under way or still to come: "
                                             "poll until true")
    missing = s.ListField(child=s.CharField(), help_text="benchmarks of the watch with no comparison at this head")
    page = s.URLField(help_text="the PR's page on this service")
    comparisons = PullComparisonSerializer(many=True)
    earlier = PullEarlierSerializer(many=True, help_text="earlier pushes' comparisons and superseded ones, newest first")
    actions = PullActionSerializer(many=True, help_text="approvals, /bench requests, re-runs and refusals, newest first")
