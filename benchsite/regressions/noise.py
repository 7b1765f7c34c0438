"""Each series' run-to-run noise, kept in SeriesNoise: refreshed when one of its runs is judged
(over its newest NOISE_WINDOW runs, and as many same-code runs beside it: canaries, pull-request
checks, so the cost of a run does not grow with its history), read by the rule
(thresholds.bound_for) and by pages."""
from __future__ import annotations

from django.db.models import Exists, OuterRef, Q

from benchsite.bench.models import Measurement, Run
from runners import contract

from .detect import sensitivity
from .models import SeriesNoise
from .samples import run_figure
from .series import point_measurements, same_machine, same_settings, series_key, series_point, series_points

NOISE_WINDOW = 40  # runs: enough for a steady estimate, few enough that an old level leaves it


def settings_of(run: Run) -> str:
    """The settings digest of RUN's series ("" for a run triggered before specs were kept)."""
    return run.kept_spec.settings if run.kept_spec_id else ""


def method_at(run: Run, metric: str, point: str = "") -> str:
    details = point_measurements(point).filter(run=run, metric=metric).values_list("details", flat=True).first()
    return contract.method_of(details)


def series_noise(run: Run, metric: str, point: str = "", method: str | None = None) -> sensitivity.Noise | None:
    """The noise kept for RUN's series of METRIC at POINT (METHOD: its figure's, read when None)."""
    method = method_at(run, metric, point) if method is None else method
    row = (SeriesNoise.objects.filter(series_key=series_key(run, point), metric=metric, settings=settings_of(run),
                                      method=method).values_list("relative", "starts", "same_code").first())
    return sensitivity.Noise(*row) if row else None


def same_code_runs(run: Run) -> dict[int, str]:
    """id -> commit of the newest runs of RUN's variant, machine and settings that measured one
    commit several times outside its series: a canary's fixed commit, the starts of a pull-request
    check (each side one commit)."""
    incorrect = Measurement.objects.filter(run=OuterRef("pk"), metric=contract.CORRECT, value=0)
    return dict(Run.objects.filter(same_machine(run), same_settings(run), benchmark_id=run.benchmark_id,
                                   variant_id=run.variant_id, state=Run.State.SUCCEEDED)
                .filter(Q(canary_run__isnull=False) | Q(trigger=Run.Trigger.PULL)).exclude(commit="")
                .exclude(Exists(incorrect)).order_by("-created_at", "-id").values_list("id", "commit")[:NOISE_WINDOW])


def same_code_elsewhere(runs: dict[int, str], metric: str, point: str, method: str) -> list[tuple[str, float]]:
    """(commit, figure) of METRIC at POINT, measured by METHOD, in RUNS (same_code_runs)."""
    found = []
    for m in point_measurements(point).filter(run_id__in=list(runs), metric=metric):
        figure = run_figure(m)
        if figure is not None and contract.method_of(m.details) == method:
            found.append((runs[m.run_id], figure))
    return found


def noise_refresh(*, run: Run) -> list[SeriesNoise]:
    """Estimate again the noise of every judged series RUN has a figure in, from its newest runs
    and the same-code runs beside it."""
    rows = []
    measurements = Measurement.all_points.filter(run=run, metric__in=contract.judged_metric_names()).only("metric", "point",
                                                                                          "first_point", "details")
    beside = same_code_runs(run)  # once a run: the same runs for every metric and point
    for m in measurements:
        point, method = series_point(m), contract.method_of(m.details)
        points = series_points(run=run, metric=m.metric, until_run=run, point=point, newest=NOISE_WINDOW)
        noise = sensitivity.noise_estimate([(p.run.commit, p.value) for p in points],
                                           same_code_elsewhere(beside, m.metric, point, method))
        if noise is None:
            continue
        row, _ = SeriesNoise.objects.update_or_create(
            series_key=series_key(run, point), metric=m.metric, settings=settings_of(run), method=method,
            defaults={"benchmark_id": run.benchmark_id, "variant_id": run.variant_id, "point": point, "run": run,
                      "relative": noise.relative, "starts": noise.starts, "same_code": noise.same_code})
        rows.append(row)
    return rows


def noises_at(run: Run, points: list[str]) -> dict[tuple[str, str, str], sensitivity.Noise]:
    """(point, metric, method) -> the noise kept for RUN's series at each of POINTS ("" the first),
    with RUN's settings: one query (a pull-request check reads them for every metric and point)."""
    keys = {series_key(run, point): point for point in points}
    rows = (SeriesNoise.objects.filter(series_key__in=list(keys), settings=settings_of(run))
            .values_list("series_key", "metric", "method", "relative", "starts", "same_code"))
    return {(keys[key], metric, method): sensitivity.Noise(relative, starts, same)
            for key, metric, method, relative, starts, same in rows}
