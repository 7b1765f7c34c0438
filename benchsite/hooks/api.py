"""The JSON API's inputs: query parameters and trigger bodies checked into plain values."""
import json
import re
from dataclasses import dataclass

from benchsite.bench.models import Benchmark, EngineSource, Run, Variant
from runners import contract

_COMMIT_PREFIX = re.compile(r"^[0-9a-f]{4,64}$")
MAX_LIMIT = 500
RUN_FILTERS = ("commit", "benchmark", "state", "ref", "limit")


class BadRequest(ValueError):
    """The request is not acceptable; `status` and the message say why."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RunFilters:
    commit: str = ""
    benchmark: Benchmark | None = None
    states: tuple[str, ...] = ()
    ref: str = ""
    limit: int = 100


def run_filters_parse(query) -> RunFilters:
    unknown = sorted(set(query) - set(RUN_FILTERS))
    if unknown:
        raise BadRequest(f"unknown parameters {unknown}; use {list(RUN_FILTERS)}")
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
    try:
        limit = int(query.get("limit", 100))
    except ValueError:
        raise BadRequest(f"limit={query['limit']!r} is not an integer") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}")
    return RunFilters(commit=commit, benchmark=benchmark, states=states, ref=query.get("ref", ""), limit=limit)


@dataclass(frozen=True)
class TriggerRequest:
    benchmark: Benchmark
    commit: str
    ref: str
    variants: list[Variant] | None
    repeats: int | None = None


def trigger_request_parse(body: bytes) -> TriggerRequest:
    try:
        data = json.loads(body or b"null")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest('send a JSON object: {"benchmark": SLUG, "commit": SHA or "ref": NAME, "variants": [...]}')
    unknown = sorted(set(data) - {"benchmark", "commit", "ref", "variants", "repeats"})
    if unknown:
        raise BadRequest(f"unknown fields {unknown}; use benchmark, commit, ref, variants, repeats")
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
    return TriggerRequest(benchmark=benchmark, commit=commit.lower(), ref=ref,
                          variants=_variants(benchmark, data.get("variants")), repeats=_repeats(data.get("repeats")))


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
