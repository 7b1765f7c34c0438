"""A comparison as its runs finish: running once the first starts, judged once all are final
(comparison.py), then reported (tasks.queue_report)."""
from __future__ import annotations

import logging
from functools import partial

from django.db import transaction
from django.utils import timezone

from benchsite.bench.lifecycle.checks import greedy_output
from benchsite.bench.lifecycle.tookeffect import took_effect_view
from benchsite.bench.models import Measurement, Run
from benchsite.bench.domain.samples import split_samples
from benchsite.bench.storage.artifacts import ArtifactError
from benchsite.regressions.samples import run_figure
from benchsite.regressions.series import host_fingerprint
from benchsite.regressions.detect import sensitivity
from benchsite.regressions.noise import noises_at
from benchsite.regressions.detect.sequential import look_quantile
from benchsite.bench.lifecycle.trigger import TriggerError
from benchsite.regressions.thresholds import explicit_threshold, judged_metrics
from runners import contract
from runners.probes.correctness import compare_outputs

from .comparison import Side, below_visible, comparison_outcome, undecided_text, variant_row
from .service import comparison_round_queue
from .models import Comparison, PullRun
from .tasks import queue_report

log = logging.getLogger(__name__)


def comparison_started(sender, run_id: int, **kwargs) -> None:
    """A run of a queued comparison was claimed: the comparison is running."""
    comparison_id = PullRun.objects.filter(run_id=run_id).values_list("comparison_id", flat=True).first()
    if comparison_id and Comparison.objects.filter(id=comparison_id, state=Comparison.State.QUEUED).update(
            state=Comparison.State.RUNNING):
        transaction.on_commit(partial(queue_report, comparison_id))


def comparison_run_finished(sender, run_id: int, **kwargs) -> None:
    """Never raises: a comparison's judgement must not fail the run."""
    comparison_id = PullRun.objects.filter(run_id=run_id).values_list("comparison_id", flat=True).first()
    if comparison_id is None:
        return
    try:
        comparison_judge(comparison_id=comparison_id)
    except Exception:
        log.exception("comparison %s not judged after run %s", comparison_id, run_id)


def comparison_judge(*, comparison_id: int) -> bool:
    """Judge the comparison once every one of its runs is final; True when judged now."""
    with transaction.atomic():
        comparison = Comparison.objects.select_for_update().select_related("benchmark").get(id=comparison_id)
        if comparison.state not in (Comparison.State.QUEUED, Comparison.State.RUNNING):
            return False
        pull_runs = list(comparison.pull_runs.select_related("run__variant").order_by("run_id"))
        base_commits = [p.run.commit for p in pull_runs if p.role == PullRun.Role.BASE and p.run.commit]
        comparison.merge_base = comparison.merge_base or (base_commits[0] if base_commits else "")
        if any(not p.run.is_final for p in pull_runs):
            comparison.save(update_fields=["merge_base"])
            return False
        table = _table(comparison, pull_runs)
        if _another_start(comparison, table):
            return False
        for row in table:
            row["visible_at_cap"] = below_visible(row, comparison.max_starts_per_side)
        comparison.table = table
        comparison.outcome, comparison.summary = comparison_outcome(comparison.table)
        if len(set(base_commits)) > 1:
            comparison.summary += f"; the base runs measured {len(set(base_commits))} different merge bases"
        comparison.state, comparison.finished_at = Comparison.State.DONE, timezone.now()
        comparison.save(update_fields=["merge_base", "table", "outcome", "summary", "state", "finished_at"])
        transaction.on_commit(partial(queue_report, comparison.id))
    return True


def _another_start(comparison: Comparison, table: list[dict]) -> bool:
    """While a row is undecided and the cap allows, queue one more start a side (base, head, on
    the same host) and say so; True when one was queued."""
    undecided = [row for row in table if not row["decided"]]
    if not undecided or comparison.rounds >= comparison.max_starts_per_side:
        return False
    round_ = comparison.rounds + 1
    try:
        comparison_round_queue(comparison, round_)
    except TriggerError as exc:
        log.warning("comparison %s: no start %s a side (%s); judged as it is", comparison.id, round_, exc)
        return False
    comparison.table, comparison.state = table, Comparison.State.RUNNING
    comparison.summary = (f"{undecided[0]['variant']}: {undecided_text(undecided[0])}: adding start {round_} "
                          f"of up to {comparison.max_starts_per_side} a side")
    comparison.save(update_fields=["merge_base", "table", "state", "summary"])
    transaction.on_commit(partial(queue_report, comparison.id))
    return True


def _table(comparison: Comparison, pull_runs: list[PullRun]) -> list[dict]:
    explicit = {m: explicit_threshold(benchmark=comparison.benchmark, metric=m) for m in judged_metrics()}
    variants = sorted({p.run.variant for p in pull_runs}, key=lambda v: v.position)
    points = [p.id for p in comparison.benchmark.points]
    quantile = look_quantile(comparison.starts_per_side, comparison.max_starts_per_side)
    rows = []
    for variant in variants:
        mine = [p for p in pull_runs if p.run.variant_id == variant.id]
        base = [p.run for p in mine if p.role == PullRun.Role.BASE]
        head = [p.run for p in mine if p.role == PullRun.Role.HEAD]
        correctness = _correctness(base, head)  # of the run: its greedy output, whatever the point
        # the series the base side belongs to: its machine and settings (regressions.noise)
        measured = next((r for r in base if r.state == Run.State.SUCCEEDED), None)
        kept = noises_at(measured, ["", *points[1:]]) if measured is not None else {}
        for point in points:  # a change at concurrency 16 is a change: one row per workload point
            first = point == points[0]
            name = variant.name if len(points) == 1 else f"{variant.name} · {point}"
            base_sides = [_side(r, None if first else point) for r in base]
            noises = _noises(kept, "" if first else point, base_sides)
            thresholds = {m: sensitivity.bound(m, noise=noises.get(m), explicit=explicit[m]).relative for m in explicit}
            row = variant_row(name, base_sides, [_side(r, None if first else point) for r in head], thresholds,
                              correctness, noises, quantile)
            rows.append({**row, "point": point})
    return rows


def _noises(kept: dict, point: str, base: list[Side]) -> dict:
    """metric -> the kept noise of its series at POINT, for the method the base side measured it with."""
    methods = {m: method for side in base for m, method in side.methods.items()}
    return {metric: noise for (at, metric, method), noise in kept.items()
            if at == point and methods.get(metric, "") == method}


def _side(run: Run, point: str | None = None) -> Side:
    """A run's figures at workload POINT (None: its first point, as every run has it)."""
    measurements = Measurement.objects.filter(run=run) if point is None else \
        Measurement.all_points.filter(run=run, point=point)
    figures, samples, methods = {}, {}, {}
    for m in measurements:
        figure = run_figure(m)
        if figure is not None:
            figures[m.metric] = figure
            samples[m.metric] = split_samples(m)[0] or [figure]
            methods[m.metric] = contract.method_of(m.details)
    view = took_effect_view(run.took_effect)
    return Side(run_id=run.id, state=run.state, error=run.error, host=host_fingerprint(run), figures=figures,
                samples=samples, methods=methods, share=figures.get(contract.ALLREDUCE_SHARE),
                took_effect=view["summary"] if view else "")


def _greedy(run: Run) -> dict | None:
    try:
        return greedy_output(run)
    except (ArtifactError, ValueError) as exc:
        log.warning("run %s: greedy output unreadable: %s", run.id, exc)
        return None


def _correctness(base: list[Run], head: list[Run]) -> tuple[str, str]:
    """Head's greedy output against base's, on the same prompt: the worst of the head runs."""
    reference = next((g for r in base if r.state == Run.State.SUCCEEDED and (g := _greedy(r))), None)
    if reference is None:
        return "not judged", "no greedy output from the base side"
    verdicts = []
    for run in head:
        output = _greedy(run) if run.state == Run.State.SUCCEEDED else None
        if output is not None:
            verdicts.append(compare_outputs(reference, output))
    if not verdicts:
        return "not judged", "no greedy output from the head side"
    bad = next((v for v in verdicts if v["verdict"] == "incorrect"), None)
    chosen = bad or next((v for v in verdicts if v["verdict"] == "drift"), verdicts[0])
    return chosen["verdict"], chosen.get("reason", "")
