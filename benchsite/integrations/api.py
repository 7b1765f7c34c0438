"""The JSON API's inputs: query parameters and trigger bodies checked into plain values."""
import json
import re
from dataclasses import dataclass

from benchsite.bench.lifecycle import outcome
from benchsite.bench.models import Benchmark, EngineSource, Run, Variant
from runners import contract

from benchsite.bench.domain import repos
from benchsite.rest.answers import ApiError

_COMMIT_PREFIX = re.compile(r"^[0-9a-f]{4,64}$")
_POINT_ID = re.compile(r"^c\d{1,4}-p\d{1,8}-m\d{1,8}(-r[0-9.e+-]{1,24})?$")  # runners.contract.WorkloadPoint.id
MAX_LIMIT = 500
RUN_FILTERS = ("commit", "benchmark", "state", "outcome", "ref", "branch", "pull_request", "repo", "limit", "point")
TRIGGER_FIELDS = ("benchmark", "commit", "ref", "variants", "repeats", "force")


class BadRequest(ApiError):
    """The request is not acceptable; `status` and the message say why (the answer: {"error": message})."""


@dataclass(frozen=True)
class RunFilters:
    commit: str = ""
    benchmark: Benchmark | None = None
    states: tuple[str, ...] = ()
    outcomes: tuple[str, ...] = ()
    ref: str = ""
    branch: str = ""
    limit: int = 100
    pull: tuple[str, int] | None = None  # (repository key, PR number)
    point: str = ""  # a workload point's id: decode_tok_s is that point's; "": each run's first point


def run_filters_parse(query) -> RunFilters:
    unknown = sorted(set(query) - set(RUN_FILTERS))
    if unknown:
        raise BadRequest(f"unknown parameters {unknown}; use {list(RUN_FILTERS)}")
    nul = sorted(key for key in query if any("\x00" in v for v in query.getlist(key)))
    if nul:  # PostgreSQL text cannot hold one: a lookup with it is an error, not "no match"
        raise BadRequest(f"parameters {nul} contain a NUL character")
    commit = query.get("commit", "").strip().lower()
    if commit and not _COMMIT_PREFIX.match(commit):
        raise BadRequest(f"commit={commit!r} is not a hexadecimal SHA or SHA prefix (4 to 64 characters)")
    benchmark = None
    if query.get("benchmark"):
        benchmark = Benchmark.objects.filter(slug=query["benchmark"]).first()
        if benchmark is None:
            raise BadRequest(f"no benchmark with slug {query['benchmark']!r}")
    states = tuple(s.strip().upper() for s in query.get("state", "").split(",") if s.strip())
    bad_states = [s for s in states if s not in Run.State.values]
    if bad_states:
        raise BadRequest(f"unknown state {bad_states}; use one or more (comma-separated) of {Run.State.values}")
    outcomes = tuple(o.strip().lower() for o in query.get("outcome", "").split(",") if o.strip())
    bad_outcomes = [o for o in outcomes if o not in outcome.WORST_FIRST]
    if bad_outcomes:
        raise BadRequest(f"unknown outcome {bad_outcomes}; use one or more (comma-separated) of "
                         f"{list(outcome.WORST_FIRST)}")
    try:
        limit = int(query.get("limit", 100))
    except ValueError:
        raise BadRequest(f"limit={query['limit']!r} is not an integer") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    point = query.get("point", "").strip()
    if point and not _POINT_ID.match(point):
        raise BadRequest(f"point={point!r} is not a workload point id like c16-p8192-m256 or c1-p128-m256-r4")
    return RunFilters(commit=commit, benchmark=benchmark, states=states, outcomes=outcomes, ref=query.get("ref", ""),
                      branch=query.get("branch", "").strip(), limit=limit, pull=_pull_parse(query), point=point)


def _pull_parse(query) -> tuple[str, int] | None:
    """pull_request=N&repo=host/owner/name (or the repository's URL): both or neither."""
    number, repo = query.get("pull_request", "").strip(), query.get("repo", "").strip()
    if not number and not repo:
        return None
    if not number or not repo:
        raise BadRequest("give pull_request and repo together: pull_request=12&repo=github.com/owner/name")
    if not (number.isascii() and number.isdigit()) or not 0 < int(number) < 2 ** 31:
        raise BadRequest(f"pull_request={number!r} is not a pull or merge request number")
    try:
        key = repos.repo_key(repo if "://" in repo else f"https://{repo}")
    except ValueError as exc:  # RepoURLError, or urlsplit's own (a malformed [IPv6] host)
        raise BadRequest(f"repo={repo!r}: {exc}; give host/owner/name, e.g. github.com/vllm-project/vllm") from None
    return key, int(number)


@dataclass(frozen=True)
class TriggerRequest:
    benchmark: Benchmark
    commit: str
    ref: str
    variants: list[Variant] | None
    repeats: int | None = None
    force: bool = False  # queue even on a pool no worker serves now


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return isinstance(value, list) and any(_has_nul(v) for v in value)


def trigger_request_parse(body: bytes) -> TriggerRequest:
    try:
        data = json.loads(body or b"null")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest('send a JSON object: {"benchmark": SLUG, "commit": SHA or "ref": NAME, "variants": [...]}')
    if _has_nul(data):  # PostgreSQL text cannot hold one: a lookup with it is an error, not "no match"
        raise BadRequest("the body contains a NUL character")
    unknown = sorted(set(data) - set(TRIGGER_FIELDS))
    if unknown:
        raise BadRequest(f"unknown fields {unknown}; use {', '.join(TRIGGER_FIELDS)}")
    slug = data.get("benchmark")
    if not isinstance(slug, str) or not slug:
        raise BadRequest("`benchmark` (a slug) is required")
    benchmark = Benchmark.objects.filter(slug=slug).first()
    if benchmark is None:
        raise BadRequest(f"no benchmark with slug {slug!r}", status=404)
    commit, ref = data.get("commit") or "", data.get("ref") or ""
    # A benchmark on the worker's installed engine has no repository: it runs with neither.
    if not commit and not ref and _builds_from_git(benchmark):
        raise BadRequest("give `commit` (a full SHA) or `ref` (a branch, tag or commit)")
    if commit and not (isinstance(commit, str) and contract.is_full_sha(commit.lower())):
        raise BadRequest(f"commit={commit!r} is not a full 40-character SHA (use `ref` for a branch or tag)")
    if ref:
        try:
            contract.check_ref(ref)
        except contract.SpecError as exc:
            raise BadRequest(str(exc)) from None
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise BadRequest(f"force={force!r}: give true or false")
    return TriggerRequest(benchmark=benchmark, commit=commit.lower(), ref=ref,
                          variants=_variants(benchmark, data.get("variants")), repeats=_repeats(data.get("repeats")),
                          force=force)


def _repeats(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= Run.MAX_REPEATS:
        raise BadRequest(f"repeats={value!r}: give a whole number from 1 to {Run.MAX_REPEATS} (omit it for the "
                         "benchmark's own)")
    return value


def _builds_from_git(benchmark: Benchmark) -> bool:
    source = benchmark.engine_source
    return source is not None and source.kind == EngineSource.Kind.GIT


def _variants(benchmark: Benchmark, names) -> list[Variant] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise BadRequest("`variants` is a non-empty list of variant names")
    found = {v.name: v for v in benchmark.variants.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        known = list(benchmark.variants.values_list("name", flat=True))
        raise BadRequest(f"benchmark {benchmark.slug!r} has no variants {missing}; it has {known}")
    return [found[n] for n in names]
