"""The `watches:` section of a benchmarks file (bench/definitions/sections.py): each repository's
watch, its branches and benchmarks, and whether a benchmark's engine may change under it."""
import os

from benchsite.bench.definitions import sections
from benchsite.bench.definitions.entries import ApplyError, Outcome, clean, diff, mapping, snapshot
from benchsite.bench.domain.repos import RepoURLError, repo_key
from benchsite.bench.models import Benchmark

from .issues.forge import issues_refusal
from .models import RepoWatch

_WATCH_FIELDS = {"repo", "branches", "benchmarks", "secret_env"}
_WATCH_OPTIONAL = {"pull_requests", "issues"}  # absent: pull-request checks with their defaults, no issues


def register() -> None:
    sections.register("watches", sections.Section(apply=watches_apply, check_benchmark=watches_still_fit))


def watches_apply(specs: list, outcome: Outcome) -> None:
    seen = set()
    for i, spec in enumerate(specs):
        key = _watch_apply(mapping(spec, f"watches[{i}]"), f"watches[{i}]", outcome)
        if key in seen:
            raise ApplyError(f"watches[{i}]: {key} is watched twice; a repository has one watch (one secret)")
        seen.add(key)


def watches_still_fit(benchmark: Benchmark, where: str) -> None:
    """A watched benchmark must keep building the watched repository's commits (bench asks before it
    saves a benchmark of the file)."""
    if benchmark.pk is None:
        return
    source = benchmark.engine_source
    try:
        key = repo_key(source.repo_url) if source is not None and source.repo_url else None
    except RepoURLError:
        key = None
    others = list(benchmark.watches.exclude(repo_key=key or "").values_list("repo_key", flat=True))
    if others:
        raise ApplyError(f"{where}: watched by {others}, so its engine must stay that repository "
                         "(remove the watch first)")
    for watch in benchmark.watches.all():
        _check_starts(watch, benchmark, where)


def _check_starts(watch: RepoWatch, benchmark: Benchmark, where: str) -> None:
    """A pull-request check of BENCHMARK under WATCH must be able to reach its first starts."""
    try:
        settings = watch.pr_settings
        if settings is not None:
            settings.cap(benchmark.max_starts_per_side)
    except ValueError as exc:
        raise ApplyError(f"{where}: watch {watch.repo_key}, benchmark {benchmark.slug}: {exc}") from None


def _watch_apply(spec: dict, where: str, outcome: Outcome) -> str:
    missing = sorted(_WATCH_FIELDS - set(spec))
    unknown = sorted(set(spec) - _WATCH_FIELDS - _WATCH_OPTIONAL)
    if missing or unknown:
        raise ApplyError(f"{where}: missing fields {missing}, unknown fields {unknown}; a watch has "
                         f"{sorted(_WATCH_FIELDS)} and optionally {sorted(_WATCH_OPTIONAL)}")
    try:
        key = repo_key(spec["repo"])
    except RepoURLError as exc:
        raise ApplyError(f"{where}: repo: {exc}") from None
    where = f"{where} ({key})"
    watch = RepoWatch.objects.filter(repo_key=key).first()
    creating = watch is None
    watch = watch or RepoWatch(repo_key=key)
    before = snapshot(watch, ["repo_url", "branches", "secret_env", "pull_requests", "issues"])
    watch.repo_url, watch.branches, watch.secret_env = spec["repo"], spec["branches"], spec["secret_env"]
    watch.pull_requests = {} if spec.get("pull_requests") is None else spec["pull_requests"]
    watch.issues = _watch_issues(spec.get("issues", False), key, where)
    clean(watch, where)
    benchmarks = _watched_benchmarks(spec["benchmarks"], key, where)
    for benchmark in benchmarks:
        _check_starts(watch, benchmark, where)
    changed = diff(before, watch)
    if creating or changed:
        watch.save()
    old = set() if creating else set(watch.benchmarks.values_list("slug", flat=True))
    new = {b.slug for b in benchmarks}
    if old != new:
        watch.benchmarks.set(benchmarks)
        changed.append(f"benchmarks: {sorted(old)} -> {sorted(new)}")
    if creating:
        outcome.changes.append(f"create watch {key}: branches {watch.branches} -> {sorted(new)}")
    elif changed:
        outcome.changes.append(f"update watch {key}: " + ", ".join(changed))
    if not os.environ.get(watch.secret_env):
        outcome.notes.append(f"watch {key}: ${watch.secret_env} is not set here; the web process needs it, "
                             "or every delivery is refused")
    return key


def _watch_issues(value, key: str, where: str) -> bool:
    """`issues: true` needs a forge and its credentials here: refused, naming what is missing."""
    if not isinstance(value, bool):
        raise ApplyError(f"{where}: issues must be true or false")
    refusal = issues_refusal(key) if value else ""
    if refusal:
        raise ApplyError(f"{where}: {refusal}")
    return value


def _watched_benchmarks(slugs, key: str, where: str) -> list[Benchmark]:
    if not isinstance(slugs, list) or not slugs or not all(isinstance(s, str) for s in slugs):
        raise ApplyError(f"{where}: benchmarks must be a non-empty list of slugs")
    found = {b.slug: b for b in Benchmark.objects.filter(slug__in=slugs).select_related("engine_source")}
    missing = [s for s in slugs if s not in found]
    if missing:
        raise ApplyError(f"{where}: no benchmarks {missing} (in the file or the database)")
    for benchmark in found.values():
        source = benchmark.engine_source
        try:
            ok = source is not None and bool(source.repo_url) and repo_key(source.repo_url) == key
        except RepoURLError:
            ok = False
        if not ok:
            engine = source.repo_url if source is not None and source.repo_url else "the installed engine"
            raise ApplyError(f"{where}: benchmark {benchmark.slug!r} runs {engine}, not {key}: a push's commit "
                             "could not be built for it (give it `engine: {repo: ...}` of this repository)")
    return [found[s] for s in slugs]
