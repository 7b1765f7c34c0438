"""Automatic bisection: queue runs on commits between a good and a bad one until the first bad
commit is found. A run that failed (build, engine) or gave a wrong output is a skip, never slow.

Each step's figure is judged against the two ends' levels by the service's one rule
(sensitivity.counts with the series' bound, thresholds.bound_for): bad when it differs from the
good level and not from the bad one, good the other way round; differing from both (the host
moved) or neither, it is placed when nearer one level by more than the noise of two starts. A step
about half-way re-measures the newest good and the oldest bad commit once each, one start on each
side of the step, and is judged again against those levels; only then, or while the series' noise
is not known, does the nearer level alone decide. The levels come from the change point
(before/after) or, for a bisection started by hand, from a run of each end queued first."""
from __future__ import annotations

import logging
import math

from django.db import transaction
from django.db.models import Q

from benchsite.bench.models import Benchmark, EngineSource, Measurement, Run, Variant
from benchsite.bench.lifecycle.trigger import runs_trigger, TriggerError
from runners import contract

from .detect import sensitivity
from .detect.bisect_search import bounds, next_step
from .detect.judging import relative_interval
from .detect.tstats import t_quantile
from .gitrange import RangeError, first_parent_range
from .models import BisectStep, Bisection, ChangePoint
from .samples import run_figure
from .selectors import awaiting_confirmation
from .signals import change_point_changed
from .thresholds import bound_for

log = logging.getLogger(__name__)


class BisectError(ValueError):
    """A bisection cannot start as asked (the message says why); nothing is scheduled."""


def _run_commit(bisection: Bisection, commit: str, role: str, recheck_of: BisectStep | None = None) -> BisectStep:
    try:
        # Bench has no 'bisect' trigger kind; the BisectStep row records why the run exists.
        # With the repeats of the run that showed the change, when there is one (a change point's).
        cp_run = bisection.change_point.run if bisection.change_point_id else None
        (run,) = runs_trigger(benchmark=bisection.benchmark, trigger=Run.Trigger.SCHEDULE, variants=[bisection.variant],
                              commit=commit, ref=commit, repeats=cp_run.repeats if cp_run else None,
                              priority=Run.Priority.BACKGROUND,  # after pushes and confirmations
                              like=cp_run)  # the settings of the series it searches
    except TriggerError as exc:
        raise BisectError(str(exc)) from None
    return BisectStep.objects.create(bisection=bisection, role=role, commit=commit, run=run, recheck_of=recheck_of)


def _source(benchmark: Benchmark) -> EngineSource:
    source = benchmark.engine_source
    if source is None or source.kind != EngineSource.Kind.GIT or not source.repo_url:
        raise BisectError(f"benchmark {benchmark.name!r} does not build its engine from a git repository")
    return source


def bisection_start(*, benchmark: Benchmark, variant: Variant, good: str, bad: str, branch: str = "",
                    metric: str = contract.DECODE_TOK_S, change_point: ChangePoint | None = None,
                    good_level: float | None = None, bad_level: float | None = None, user=None) -> Bisection:
    """Resolve the range and queue the first runs. Raises BisectError (and schedules nothing) for
    a benchmark without a repository, unrelated commits, a range off the branch or a
    repository that cannot be fetched."""
    if variant.benchmark_id != benchmark.id:
        raise BisectError(f"variant {variant.name!r} does not belong to {benchmark.name!r}")
    if metric not in contract.METRICS or contract.METRICS[metric].direction == "none":
        raise BisectError(f"metric {metric!r} has no better direction to bisect on")
    source = _source(benchmark)
    branch = branch or source.default_ref or "main"
    try:
        good_sha, commits = first_parent_range(repo_url=source.repo_url, branch=branch, good=good, bad=bad)
    except RangeError as exc:
        raise BisectError(str(exc)) from None
    with transaction.atomic():
        if change_point is not None:  # found by the service: once per range, even from two web workers at once
            Benchmark.objects.select_for_update().filter(pk=benchmark.pk).first()
            done = Bisection.objects.filter(benchmark=benchmark, good_commit=good_sha, bad_commit=commits[-1]).first()
            if done is not None:
                raise BisectError(f"the range is bisected already (bisection {done.pk})")
        bisection = Bisection.objects.create(
            benchmark=benchmark, variant=variant, metric=metric, change_point=change_point, branch=branch,
            good_commit=good_sha, bad_commit=commits[-1], commits=commits,
            good_level=good_level, bad_level=bad_level,
            started_by=user.get_username() if user is not None and user.is_authenticated else "")
        if good_level is None or bad_level is None:
            _run_commit(bisection, good_sha, BisectStep.Role.GOOD_END)
            _run_commit(bisection, commits[-1], BisectStep.Role.BAD_END)
        else:
            bisection_advance(bisection=bisection)
    return bisection


def _finish(bisection: Bisection, state: str, message: str, first_bad: str = "") -> None:
    bisection.state, bisection.message, bisection.first_bad = state, message, first_bad
    bisection.save(update_fields=["state", "message", "first_bad"])
    if bisection.change_point is not None:
        change_point_changed.send(sender=ChangePoint, change_point=bisection.change_point)


def _levels_known(bisection: Bisection) -> bool:
    if bisection.good_level is not None and bisection.bad_level is not None:
        return True
    ends = {s.role: s for s in bisection.steps.filter(role__in=[BisectStep.Role.GOOD_END, BisectStep.Role.BAD_END])}
    if any(s.outcome == BisectStep.Outcome.PENDING for s in ends.values()):
        return False
    if any(s.outcome == BisectStep.Outcome.SKIP or s.value is None for s in ends.values()):
        _finish(bisection, Bisection.State.FAILED, "an end of the range could not be measured (failed or wrong output)")
        return False
    bisection.good_level = ends[BisectStep.Role.GOOD_END].value
    bisection.bad_level = ends[BisectStep.Role.BAD_END].value
    bisection.save(update_fields=["good_level", "bad_level"])
    return True


def bisection_advance(*, bisection: Bisection) -> None:
    """Queue the next run, or conclude; waits while a step is pending."""
    if bisection.state != Bisection.State.RUNNING or not _levels_known(bisection):
        return
    probes = bisection.steps.filter(role=BisectStep.Role.PROBE)
    if probes.filter(outcome=BisectStep.Outcome.PENDING).exists():
        return
    outcomes = dict(probes.values_list("commit", "outcome"))
    decision = next_step(bisection.commits, outcomes)
    if decision.action == "found":
        _finish(bisection, Bisection.State.FOUND, f"first bad commit {decision.commit}", decision.commit)
    elif decision.action == "undecidable":
        _finish(bisection, Bisection.State.UNDECIDABLE,
                "skipped commits hide the first bad one; it is one of " + ", ".join(decision.candidates))
    else:
        _run_commit(bisection, decision.commit, BisectStep.Role.PROBE)


def _figure(bisection: Bisection, run: Run) -> tuple[float | None, str]:
    """The run's clean figure of the bisected metric, or None and why it is a skip."""
    if run.state != Run.State.SUCCEEDED:
        return None, f"run {run.state.lower()}: {run.failure_kind or 'failed'}"
    if Measurement.objects.filter(run=run, metric=contract.CORRECT, value=0).exists():
        return None, "wrong output"
    measurement = Measurement.objects.filter(run=run, metric=bisection.metric).first()
    value = run_figure(measurement) if measurement is not None else None
    return value, "" if value is not None else f"no clean {bisection.metric}"


def _bound(bisection: Bisection) -> sensitivity.Bound | None:
    """The bound of the series the bisection searches (its change point's run's), None without one."""
    run = bisection.change_point.run if bisection.change_point_id else None
    if run is None:
        end = bisection.steps.filter(role=BisectStep.Role.GOOD_END, run__isnull=False).select_related("run").first()
        run = end.run if end else None
    return bound_for(run=run, metric=bisection.metric) if run is not None else None


def _half(level: float, bound: sensitivity.Bound) -> float:
    """The 95% half-width of the difference of two starts at LEVEL, from the series' noise (a
    level may itself be one start: a change found by a strong verdict, a re-measured side)."""
    return t_quantile(0.975, max(1, bound.noise.starts - 1)) * bound.noise.relative * math.sqrt(2) * abs(level)


def _differs(value: float, level: float, bound: sensitivity.Bound) -> bool:
    """Does one start's VALUE differ from LEVEL by the rule: the interval of their difference
    excludes zero and the change reaches the bound?"""
    if level == 0:
        return value != 0
    low, high = relative_interval(value=value, mean=level, half=_half(level, bound))
    return sensitivity.counts(effect=value / level - 1, ci_low=low, ci_high=high, threshold=bound.relative)


def _nearer(value: float, good: float, bad: float) -> str:
    return BisectStep.Outcome.BAD if abs(value - bad) < abs(value - good) else BisectStep.Outcome.GOOD


def _place(value: float, good: float, bad: float, bound: sensitivity.Bound | None) -> str | None:
    """GOOD or BAD by the rule: it differs from one level and not from the other; or, differing
    from both (the host moved) or from neither, it is nearer one by more than the noise of two
    starts. None when it cannot tell: about half-way. Without a known noise: the nearer level."""
    if bound is None or bound.noise is None or not bound.noise.known:
        return _nearer(value, good, bad)
    off_good, off_bad = _differs(value, good, bound), _differs(value, bad, bound)
    if off_good != off_bad:
        return BisectStep.Outcome.BAD if off_good else BisectStep.Outcome.GOOD
    if abs(abs(value - good) - abs(value - bad)) > _half((good + bad) / 2, bound):
        return _nearer(value, good, bad)
    return None


def _recheck(step: BisectStep) -> None:
    """One more start on each side of an inconclusive probe: the newest good and the oldest bad commit."""
    bisection = step.bisection
    outcomes = dict(bisection.steps.filter(role=BisectStep.Role.PROBE).values_list("commit", "outcome"))
    lo, hi = bounds(bisection.commits, outcomes)
    good = bisection.commits[lo] if lo >= 0 else bisection.good_commit
    _run_commit(bisection, good, BisectStep.Role.GOOD_AGAIN, recheck_of=step)
    _run_commit(bisection, bisection.commits[hi], BisectStep.Role.BAD_AGAIN, recheck_of=step)


def _judge_probe(step: BisectStep) -> None:
    """Place a measured probe (its value set): by the rule against the bisection's levels, or,
    once both sides were re-measured, against theirs; inconclusive the first time: re-measure."""
    bisection = step.bisection
    good, bad = bisection.good_level, bisection.bad_level
    again = {s.role: s.value for s in step.rechecks.all()}
    good = again.get(BisectStep.Role.GOOD_AGAIN) or good
    bad = again.get(BisectStep.Role.BAD_AGAIN) or bad
    placed = _place(step.value, good, bad, _bound(bisection))
    if placed is None and not again:
        step.note = "inconclusive against both levels: one more start on each side"
        _recheck(step)
    elif placed is None:
        placed = _nearer(step.value, good, bad)
        step.note = f"inconclusive after both sides were re-measured ({good:.6g} / {bad:.6g}): the nearer level"
    elif again:
        step.note = f"placed against the re-measured sides ({good:.6g} / {bad:.6g})"
    step.outcome = placed or BisectStep.Outcome.PENDING
    step.save(update_fields=["outcome", "note"])


def _record(step: BisectStep, run: Run) -> BisectStep | None:
    """Record a finished step's figure; returns the probe whose judgement may now go on."""
    step.value, note = _figure(step.bisection, run)
    if step.role in (BisectStep.Role.GOOD_AGAIN, BisectStep.Role.BAD_AGAIN):
        step.outcome = (BisectStep.Outcome.SKIP if step.value is None else
                        BisectStep.Outcome.GOOD if step.role == BisectStep.Role.GOOD_AGAIN else BisectStep.Outcome.BAD)
        step.note = note
        step.save(update_fields=["outcome", "value", "note"])
        probe = step.recheck_of
        if probe.rechecks.filter(outcome=BisectStep.Outcome.PENDING).exists():
            return None
        _judge_probe(probe)
        return probe
    if step.value is None:
        step.outcome, step.note = BisectStep.Outcome.SKIP, note
    elif step.role != BisectStep.Role.PROBE:
        step.outcome = BisectStep.Outcome.GOOD if step.role == BisectStep.Role.GOOD_END else BisectStep.Outcome.BAD
    step.save(update_fields=["outcome", "value", "note"])
    if step.role == BisectStep.Role.PROBE and step.value is not None:
        _judge_probe(step)
    return step


def bisect_steps_record(*, run: Run) -> list[Bisection]:
    """A finished run that is a bisection step: judge it and move its bisection on."""
    advanced = []
    for step in BisectStep.objects.filter(run=run, outcome=BisectStep.Outcome.PENDING).select_related(
            "bisection", "recheck_of"):
        try:
            if _record(step, run) is None:
                continue  # the other side of an inconclusive probe is still being re-measured
            bisection_advance(bisection=step.bisection)
        except BisectError as exc:
            _finish(step.bisection, Bisection.State.FAILED, str(exc))
        advanced.append(step.bisection)
    return advanced


def _effect(cp: ChangePoint) -> float:
    """How far a change moved, on the ratio: 10x slower tok/s weighs as much as 10x longer ITL."""
    if cp.before > 0 and cp.after > 0:
        return abs(math.log(cp.after / cp.before))
    return abs(cp.change or 0.0)


def _pick(confirmed: list[ChangePoint]) -> ChangePoint:
    """The variant with the largest effect; on it, the headline metric (decode tok/s) when it moved."""
    best = max(confirmed, key=_effect)
    return next((c for c in confirmed if c.variant_id == best.variant_id and c.metric == contract.DECODE_TOK_S), best)


def _last_measured(cp: ChangePoint) -> str:
    """The good end of a bisection: the last measured commit before the change (previous_commit
    is the commit's parent in git: the commits of one push between them were never measured)."""
    return cp.previous_run.commit if cp.previous_run is not None else cp.previous_commit


def bisection_for_change(*, change_point: ChangePoint) -> Bisection | None:
    """One bisection per commit range of a benchmark, whose two commits are more than one commit
    apart: once no regression found in that range (any metric, any variant) awaits its
    confirmation, on the confirmed one of the largest effect (_pick). Call it whenever a change
    point's confirmation is settled; the last one to settle starts it."""
    cp = change_point
    good = _last_measured(cp)
    if not (contract.is_full_sha(cp.commit) and contract.is_full_sha(good)) or cp.commit == good:
        return None
    if cp.metric == contract.CORRECT:
        return None
    same_range = (ChangePoint.objects.filter(benchmark_id=cp.benchmark_id, commit=cp.commit,
                                             previous_commit=cp.previous_commit, is_regression=True)
                  .exclude(metric=contract.CORRECT))
    bisected = Bisection.objects.filter(Q(change_point__in=same_range)
                                        | Q(good_commit__in=(cp.previous_commit, good), bad_commit=cp.commit),
                                        benchmark_id=cp.benchmark_id)
    if bisected.exists() or awaiting_confirmation(same_range).exists():
        return None
    confirmed = list(same_range.filter(status=ChangePoint.Status.CONFIRMED).select_related("run", "variant"))
    if not confirmed:
        return None
    chosen = _pick(confirmed)
    branch = chosen.run.ref if chosen.run.ref and not contract.is_full_sha(chosen.run.ref) else ""
    try:
        return bisection_start(benchmark=chosen.benchmark, variant=chosen.variant, good=_last_measured(chosen),
                               bad=chosen.commit, branch=branch, metric=chosen.metric, change_point=chosen,
                               good_level=chosen.before, bad_level=chosen.after)
    except BisectError as exc:
        log.warning("change point %s not bisected: %s", chosen.id, exc)
        return None
