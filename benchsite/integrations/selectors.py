"""Reads for the JSON API and the commit status."""
from collections import defaultdict

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery
from django.urls import reverse

from benchsite.bench.models import Measurement, Run
from benchsite.bench.worker.pools import run_queue
from benchsite.regressions.models import Verdict
from benchsite.regressions.outcomes import commit_outcome, commit_runs_query
from runners import contract

from .api import BadRequest, RunFilters
from .pulls import selectors as pull_selectors
from .pulls.models import Comparison, PullRun

# Measurements every run of the API carries by name (null when the run has none).
FIGURES = (contract.DECODE_TOK_S, contract.CORRECT, contract.ALLREDUCE_SHARE, contract.CEILING_TOK_S)
SHORTEST_PREFIX = 7


def _with_figures(runs: QuerySet[Run], point: str = "") -> QuerySet[Run]:
    """One subquery per figure, one query for every run's verdicts and one for every run's
    measurements at each workload point, however many runs. The figures are each run's first
    point's; decode_tok_s is POINT's when given."""
    figures = {name: Measurement.objects.filter(run=OuterRef("pk"), metric=name) for name in FIGURES}
    if point:
        figures[contract.DECODE_TOK_S] = Measurement.all_points.filter(run=OuterRef("pk"), metric=contract.DECODE_TOK_S,
                                                                       point=point)
    verdicts = Verdict.objects.filter(point="").exclude(metric=contract.CORRECT).order_by("metric")  # the first point's
    return runs.annotate(**{f"figure_{name}": Subquery(q.values("value")[:1]) for name, q in figures.items()}).prefetch_related(
        Prefetch("verdicts", queryset=verdicts, to_attr="api_verdicts"))


MEASUREMENT_KEYS = ("point", "metric", "value", "unit", "ci_low", "ci_high")


def _read(runs: QuerySet[Run]) -> list[Run]:
    """RUNS (read through _with_figures), each with its measurements at every point as rows in
    `api_measurements`: one query for all, and no model instance per row (800 for 100 runs)."""
    found = list(runs)
    by_run = defaultdict(list)
    if found:
        for row in (Measurement.all_points.filter(run_id__in=[r.id for r in found]).order_by("point", "metric")
                    .values("run_id", "first_point", *MEASUREMENT_KEYS)):
            by_run[row.pop("run_id")].append(row)
    for run in found:
        run.api_measurements = by_run[run.id]
    return found


def _point_json(run: Run, point: str) -> dict:
    """The point decode_tok_s is of, and every measurement of the run with its point."""
    rows = run.api_measurements
    first = next((m["point"] for m in rows if m["first_point"] and m["point"]), "") or run.benchmark.default_point
    return {"point": point or first,
            "measurements": [{**{key: m[key] for key in MEASUREMENT_KEYS}, "point": m["point"] or first}
                             for m in rows]}  # a row written without a point is the first point's


def _runs() -> QuerySet[Run]:
    # A run of a PR's comparison says which PR and side: joined here, never a query per run. The
    # live log (up to 64 KB a run), the host's details and the engine's settings are not in the API's run.
    return (Run.objects.select_related("benchmark", "variant", "pull_run__comparison__pull")
            .defer("live_log", "host_info", "took_effect", "notes", "benchmark__description", "benchmark__prompt",
                   "benchmark__engine_args", "benchmark__engine_env", "benchmark__packages", "variant__flags",
                   "variant__env"))


def _run_url(base_url: str) -> str:
    """The run page's URL without the id: one reverse() for every run of a list."""
    return base_url.rstrip("/") + reverse("bench:run", args=[0])[:-2]


def runs_filter(*, filters: RunFilters) -> list[Run]:
    runs = _runs().order_by("-created_at", "-id")
    if filters.commit:
        runs = runs.filter(commit__startswith=filters.commit)
    if filters.benchmark is not None:
        runs = runs.filter(benchmark=filters.benchmark)
    if filters.states:
        runs = runs.filter(state__in=filters.states)
    if filters.outcomes:
        runs = runs.filter(outcome__in=filters.outcomes)
    if filters.ref:
        runs = runs.filter(ref=filters.ref)
    if filters.branch:
        runs = runs.filter(branch=filters.branch)
    if filters.pull is not None:
        key, number = filters.pull
        runs = runs.filter(pull_run__comparison__pull__repo_key=key, pull_run__comparison__pull__number=number)
    found = _read(_with_figures(runs, filters.point)[: filters.limit])
    for run in found:
        run.api_point = filters.point
    return found


def run_json(run: Run, *, base_url: str, run_url: str | None = None) -> dict:
    """One run for API clients. `base_url` makes `url` absolute (scheme://host); RUN_URL is
    _run_url(base_url), given when many runs are written."""
    def when(dt):
        return dt.isoformat() if dt else None

    if not hasattr(run, "api_verdicts"):  # a run not read through runs_filter (just triggered)
        run = _read(_with_figures(_runs().filter(id=run.id)))[0]
    correct = getattr(run, f"figure_{contract.CORRECT}")
    pull_run = getattr(run, "pull_run", None)  # its absence raises an AttributeError
    return {
        "id": run.id,
        "benchmark": run.benchmark.slug,
        "variant": run.variant.name,
        "commit": run.commit,
        "ref": run.ref,
        "branch": run.branch,
        "state": run.state,
        "trigger": run.trigger,
        "priority": Run.Priority(run.priority).name.lower(),
        "created_at": when(run.created_at),
        "started_at": when(run.started_at),
        "finished_at": when(run.finished_at),
        "url": f"{run_url or _run_url(base_url)}{run.id}/",
        "decode_tok_s": getattr(run, f"figure_{contract.DECODE_TOK_S}"),
        **_point_json(run, getattr(run, "api_point", "")),
        "error": run.error,
        "queue": run_queue(run),  # a queued run's place in its pool's queue, and who serves the pool
        "outcome": run.outcome,
        "outcome_final": run.outcome_final,
        "correct": None if correct is None else correct == 1,
        "verdicts": [{"metric": v.metric, "effect": v.effect,
                      "interval": [v.ci_low, v.ci_high] if v.ci_low is not None and v.ci_high is not None else None,
                      "threshold": v.threshold, "threshold_source": v.threshold_source or None,
                      "noise": v.noise, "noise_starts": v.noise_starts} for v in run.api_verdicts],
        "allreduce_share": getattr(run, f"figure_{contract.ALLREDUCE_SHARE}"),
        "ceiling_tok_s": getattr(run, f"figure_{contract.CEILING_TOK_S}"),
        "pull_request": pull_run.comparison.pull.number if pull_run else None,
        "role": pull_run.role if pull_run else None,
    }


def runs_json(runs, *, base_url: str) -> list[dict]:
    run_url = _run_url(base_url)
    return [run_json(r, base_url=base_url, run_url=run_url) for r in runs]


def commit_resolve(prefix: str) -> str:
    """The one commit of any run that `prefix` names (a full SHA or a unique prefix of at least
    SHORTEST_PREFIX characters); BadRequest (400 or 404) with the reason otherwise."""
    prefix = prefix.strip().lower()
    if not (SHORTEST_PREFIX <= len(prefix) <= 64) or any(c not in "0123456789abcdef" for c in prefix):
        raise BadRequest(f"{prefix!r} is not a commit: give a full SHA or a prefix of at least {SHORTEST_PREFIX} "
                         "hexadecimal characters")
    found = list(Run.objects.filter(commit__startswith=prefix).order_by("commit").values_list("commit", flat=True)
                 .distinct()[:6])
    if not found:
        raise BadRequest(f"no run of commit {prefix}", status=404)
    if len(found) > 1:
        shown = ", ".join(c[:12] for c in found[:5]) + (", ..." if len(found) > 5 else "")
        raise BadRequest(f"commit prefix {prefix} is ambiguous: it names {shown}; give more characters")
    return found[0]


def commit_json(commit: str, *, base_url: str) -> dict:
    """A commit's outcome: the worst of the runs that count (regressions.outcomes.counted_runs)."""
    runs = _read(_with_figures(commit_runs_query(commit, _runs())))
    word, final = commit_outcome(runs)
    return {"commit": commit, "outcome": word, "outcome_final": final, "runs": runs_json(runs, base_url=base_url)}


def _when(dt) -> str | None:
    return dt.isoformat() if dt else None


def _comparison_json(c: Comparison, runs: list[PullRun], *, base_url: str) -> dict:
    run_url = _run_url(base_url)
    return {"benchmark": c.benchmark.slug, "head_sha": c.head_sha, "merge_base": c.merge_base, "state": c.state,
            "outcome": pull_selectors.comparison_word(c), "summary": c.summary, "table": c.table, "host": c.host,
            "created_at": _when(c.created_at), "finished_at": _when(c.finished_at),
            "starts_per_side": c.starts_per_side, "max_starts_per_side": c.max_starts_per_side,
            "accepted_by": c.accepted_by or None, "accepted_at": _when(c.accepted_at),
            "starts_used": {role: len({p.round for p in runs if p.role == role}) for role in ("base", "head")},
            "runs": [{"id": p.run_id, "role": p.role, "variant": p.run.variant.name, "state": p.run.state,
                      "round": p.round, "url": f"{run_url}{p.run_id}/"} for p in runs]}


def pull_json(summary: pull_selectors.PullSummary, *, base_url: str) -> dict:
    """A PR's outcome over its latest head's comparisons, their tables and runs, the earlier
    pushes and who asked for what."""
    pull = summary.pull
    return {
        "repo": pull.repo_key, "number": pull.number, "title": pull.title, "url": pull.url, "state": pull.state,
        "head_sha": pull.head_sha, "base_branch": pull.base_branch, "is_fork": pull.is_fork,
        "outcome": summary.outcome, "outcome_final": summary.outcome_final, "missing": summary.missing,
        "page": base_url.rstrip("/") + pull_selectors.pull_page_path(pull),
        "comparisons": [_comparison_json(c, summary.runs[c.id], base_url=base_url) for c in summary.latest],
        "earlier": [{"head_sha": c.head_sha, "benchmark": c.benchmark.slug, "state": c.state,
                     "outcome": pull_selectors.comparison_word(c), "created_at": _when(c.created_at)}
                    for c in summary.earlier],
        "actions": [{"kind": a.kind, "actor": a.actor, "association": a.association, "accepted": a.accepted,
                     "detail": a.detail, "head_sha": a.head_sha, "at": _when(a.at)} for a in summary.actions],
    }
