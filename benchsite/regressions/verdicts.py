"""Verdicts: is a finished run's figure better, worse or the same as its series' run-to-run history?

The noise that matters is between runs (each its own engine start), far larger on the CPU engine
than the spread of repeats within one run. So the run's figure (median of its clean repeats) is
compared with the figures of earlier runs of the same series (judging.py: the prediction interval
of one new run from the run-to-run spread of the n baseline runs). A verdict needs the interval
to exclude zero (significant) and the effect to reach the metric's threshold (material)."""
from __future__ import annotations

from django.conf import settings
from django.db import transaction

from benchsite.bench.domain.branches import main_line_q
from benchsite.bench.models import Measurement, Run
from runners import contract

from .canary import canary_shift
from .detect import judging
from .hosthealth import host_health_note
from .models import ChangePoint, Verdict
from .samples import run_figure
from .series import (Point, host_fingerprint, is_incorrect, other_settings_before, same_machine, series_key, series_point,
                     series_points)
from .thresholds import bound_for, judged_metrics

Kind = Verdict.Kind


def baseline_reset(*, run: Run, metric: str, point: str = "") -> ChangePoint | None:
    """The latest change of this series marked expected: the baseline starts there."""
    return (ChangePoint.objects.filter(series_key=series_key(run, point), metric=metric, status=ChangePoint.Status.EXPECTED,
                                       run__created_at__lte=run.created_at)
            .select_related("run").order_by("-run__created_at", "-run_id").first())


def unaccepted_change_runs(run: Run, metric: str, point: str = "") -> set[int]:
    """First runs of the series' open or confirmed change points: the baseline stops before the
    first of them (its level is not accepted until marked expected, and mixing both levels
    would inflate the spread and hide the next regression). One its re-run contradicted is not."""
    return set(ChangePoint.objects.filter(series_key=series_key(run, point), metric=metric,
                                          status__in=[ChangePoint.Status.OPEN, ChangePoint.Status.CONFIRMED])
               .exclude(confirmation=ChangePoint.Confirmation.DISAGREED)
               .values_list("run_id", flat=True))


def confirmed_suspect(run: Run) -> Run | None:
    """The run whose change RUN re-measures, when RUN is a confirmation run (the earliest, when
    it confirms the changes of several runs of one commit); else None."""
    return Run.objects.filter(change_points__confirm_run=run).order_by("created_at", "id").first()


def baseline_points(*, run: Run, metric: str, point: str = "") -> tuple[list[Point], ChangePoint | None]:
    """The runs RUN is judged against; for a confirmation run, those before the run it confirms
    (never that run itself, whose figure is what is in doubt)."""
    reset = baseline_reset(run=run, metric=metric, point=point)
    suspect = confirmed_suspect(run)
    stops = unaccepted_change_runs(run, metric, point)
    # the newest runs suffice, but an unaccepted change may end the history anywhere: then read it all
    newest = None if stops else settings.BENCH_VERDICT_MAX_HISTORY + 2
    points = series_points(run=run, metric=metric, since_run=reset.run if reset else None, until_run=suspect or run,
                           point=point, newest=newest)
    history = [p for p in points if p.run.id not in {run.id, suspect and suspect.id}]
    cut = next((i for i, p in enumerate(history) if p.run.id in stops), len(history))
    return history[:cut][-settings.BENCH_VERDICT_MAX_HISTORY:], reset


def _describe(run: Run, history: list[Point], reset: ChangePoint | None, other: Run | None, method: str = "") -> str:
    """The baseline in words; OTHER: the newest earlier run of the series' machine and line that ran
    with other settings (series.other_settings_before); METHOD: the figure's, when not the original."""
    where = f"{host_fingerprint(run) or 'an unknown host'}, pool {run.benchmark.gpu_pool}"
    since = f", since the expected change at run #{reset.run_id}" if reset else ""
    if suspect := confirmed_suspect(run):
        since += f", before run #{suspect.id} that this run confirms"
    if method:
        since += f", of figures measured the same way ({method})"
    if other is not None:
        since += f", with this run's settings (runs with others, the newest #{other.id}, are another series)"
    if not history:
        return f"no earlier correct run of {run.variant.name} on {where}{since}"
    ids = ", ".join(f"#{p.run.id}" for p in history)
    builds = sorted({p.run.build.engine_version for p in history if p.run.build and p.run.build.engine_version})
    mine = run.build.engine_version if run.build else ""
    engine = f"; engine build {', '.join(builds)} vs this run's {mine}" if mine and builds and builds != [mine] else ""
    return f"mean of {len(history)} earlier correct runs of {run.variant.name} on {where}{since}: {ids}{engine}"


def host_change_note(run: Run) -> str:
    """'host changed ...' when the previous run of this benchmark and variant ran on a machine of
    another fingerprint (a comparison across machines is never made silently); else ''."""
    previous = (Run.objects.filter(benchmark_id=run.benchmark_id, variant_id=run.variant_id, state=Run.State.SUCCEEDED,
                                   created_at__lte=run.created_at, bisect_steps__isnull=True, canary_run__isnull=True)
                .exclude(trigger=Run.Trigger.PULL).exclude(id=run.id).exclude(created_at=run.created_at, id__gt=run.id)
                .order_by("-created_at", "-id").first())
    if previous is None or Run.objects.filter(same_machine(run), id=previous.id).exists():
        return ""
    return (f"host changed: the previous run #{previous.id} ran on {host_fingerprint(previous) or 'an unknown host'}, "
            f"this one on {host_fingerprint(run) or 'an unknown host'}")


def judge(*, value: float, history: list[float], direction: str, threshold: float,
          incorrect: bool = False) -> dict:
    """The verdict of one figure against the run-to-run history (judging.judge, this app's settings)."""
    return judging.judge(value=value, history=history, direction=direction, threshold=threshold,
                         incorrect=incorrect, min_history=settings.BENCH_VERDICT_MIN_HISTORY)


def _speed_verdict(run: Run, measurement: Measurement, incorrect: bool, other: Run | None) -> dict:
    metric, point, method = measurement.metric, series_point(measurement), contract.method_of(measurement.details)
    bound = bound_for(run=run, metric=metric, point=point, method=method)
    threshold = bound.relative
    history, reset = baseline_points(run=run, metric=metric, point=point)
    fields = {"threshold": threshold, "threshold_source": bound.source, "baseline_runs": [p.run.id for p in history],
              "noise": bound.noise.relative if bound.noise else None,
              "noise_starts": bound.noise.starts if bound.noise else None,
              "baseline_description": _describe(run, history, reset, other, method)}
    value = run_figure(measurement)
    if value is None:
        return {**fields, "kind": Kind.NOT_ENOUGH_DATA, "note": "every repeat was flagged: no clean sample"}
    moved = host_change_note(run)
    if moved and not history:
        return {**fields, "value": value, "kind": Kind.NOT_ENOUGH_DATA, "note": f"not comparable: {moved}"}
    verdict = judge(value=value, history=[p.value for p in history], direction=contract.METRICS[metric].direction,
                    threshold=threshold, incorrect=incorrect)
    if moved:
        verdict["note"] = f"{moved}; compared only with runs on this one. {verdict.get('note', '')}".strip()
    if flagged := host_health_note(run):
        verdict["note"] = f"{flagged}. {verdict.get('note', '')}".strip()
    # the canary measures the first point only
    shift = canary_shift(run=run, metric=metric, since=history[0].run.created_at) if history and not point else None
    if shift is not None and verdict["kind"] in (Kind.REGRESSION, Kind.IMPROVEMENT):
        verdict["note"] = (f"the canary (a fixed commit) moved {shift.change * 100:+.1f}% on this host since the "
                           f"baseline: a host or environment change, not this code. {verdict['note']}").strip()
    return {**fields, "value": value, **verdict}


def _previous_correctness(run: Run) -> float | None:
    comparable = Run.objects.filter(same_machine(run), main_line_q(run.benchmark))
    return (Measurement.objects.filter(run__in=comparable, run__benchmark_id=run.benchmark_id, run__variant_id=run.variant_id,
                                       run__state=Run.State.SUCCEEDED,
                                       metric=contract.CORRECT, run__created_at__lt=run.created_at)
            .order_by("-run__created_at", "-run_id").values_list("value", flat=True).first())


def _correctness_verdict(run: Run, measurement: Measurement) -> dict:
    before = _previous_correctness(run)
    fields = {"value": measurement.value, "baseline": before, "threshold": 0.0,
              "baseline_description": "the previous run of this series" if before is not None else "no earlier run"}
    if before is None:
        return {**fields, "kind": Kind.NOT_ENOUGH_DATA}
    if measurement.value == 0 and before == 1:
        return {**fields, "kind": Kind.REGRESSION, "note": "newly incorrect output"}
    return {**fields, "kind": Kind.NO_CHANGE}


def verdicts_compute(*, run: Run) -> list[Verdict]:
    """Judge every metric of a succeeded run at each of its workload points, each against its
    point's series (idempotent: a second call replaces the verdicts)."""
    if run.state != Run.State.SUCCEEDED:
        return []
    incorrect = is_incorrect(run)
    other = other_settings_before(run)  # once a run: it reads the series' whole history
    wanted = set(judged_metrics()) | {contract.CORRECT}
    verdicts = []
    with transaction.atomic():
        for measurement in Measurement.all_points.filter(run=run, metric__in=wanted):
            point = series_point(measurement)
            if measurement.metric == contract.CORRECT and point:
                continue  # the output is judged once, at the first point
            if measurement.metric == contract.CORRECT:
                fields = _correctness_verdict(run, measurement)
            else:
                fields = _speed_verdict(run, measurement, incorrect, other)
            fields["series_key"] = series_key(run, point)
            verdict, _ = Verdict.objects.update_or_create(run=run, metric=measurement.metric, point=point,
                                                          defaults=fields)
            verdicts.append(verdict)
    return verdicts
