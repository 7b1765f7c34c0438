"""Reads for the web pages and JSON endpoints. No writes here (those are in `lifecycle`)."""
from __future__ import annotations

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from runners.contract import CORRECT, DECODE_TOK_S

from ..storage.artifacts import ArtifactError, read_tail
from ..domain.branches import main_line_q
from ..domain.samples import split_samples
from ..models import Artifact, Benchmark, Measurement, Run, Variant

LOG_TAIL_LINES = 60
LOG_TAIL_BYTES = 64 * 1024  # read from the stored log's end: a log of any size costs this much


# --- benchmarks ------------------------------------------------------------------------


def _variants_with_latest(line: Q = Q()) -> QuerySet[Variant]:
    """Variants annotated with their latest run (any state) and latest successful decode tok/s
    (of the runs LINE selects: a benchmark's main line, bench.domain.branches)."""
    latest_run = Run.objects.filter(variant=OuterRef("pk")).order_by("-created_at", "-id")
    # A run judged incorrect never reports its speed as the variant's latest figure. The newest
    # good run is found on runs (by the variant's index), then its value: sorting the joined
    # measurements instead costs 0.2 s at 10,000 runs.
    incorrect = Measurement.objects.filter(run=OuterRef("pk"), metric=CORRECT, value=0)
    has_decode = Measurement.objects.filter(run=OuterRef("pk"), metric=DECODE_TOK_S)
    latest_good = (
        Run.objects.filter(line, variant=OuterRef("pk"), state=Run.State.SUCCEEDED)
        .filter(Exists(has_decode)).exclude(Exists(incorrect))
        .order_by("-created_at", "-id")
    )
    decode_of = Measurement.objects.filter(run_id=OuterRef("latest_decode_run_id"), metric=DECODE_TOK_S)
    return Variant.objects.order_by("position").annotate(
        latest_run_id=Subquery(latest_run.values("id")[:1]),
        latest_run_state=Subquery(latest_run.values("state")[:1]),
        latest_run_outcome=Subquery(latest_run.values("outcome")[:1]),
        latest_run_outcome_final=Subquery(latest_run.values("outcome_final")[:1]),
        latest_decode_run_id=Subquery(latest_good.values("id")[:1]),
        latest_took_effect=Subquery(latest_good.values("took_effect")[:1]),
    ).annotate(latest_decode_tok_s=Subquery(decode_of.values("value")[:1]))


def benchmark_list() -> QuerySet[Benchmark]:
    """All benchmarks, each with `.variants.all()` annotated as in `_variants_with_latest`."""
    return Benchmark.objects.order_by("name").prefetch_related(Prefetch("variants", queryset=_variants_with_latest()))


def benchmark_queryset() -> QuerySet[Benchmark]:
    return Benchmark.objects.select_related("engine_source")


def benchmark_ladder(*, benchmark: Benchmark) -> list[Variant]:
    """The optimization ladder in order, annotated with each step's latest run and tok/s."""
    return list(_variants_with_latest(main_line_q(benchmark)).filter(benchmark=benchmark)
                .select_related("builds_on").prefetch_related("patches"))


def benchmark_recent_runs(*, benchmark: Benchmark, limit: int = 30) -> list[Run]:
    """The newest runs, each with `.decode` set to its decode_tok_s Measurement or None."""
    runs = list(
        Run.objects.filter(benchmark=benchmark)
        .select_related("variant", "triggered_by")
        .prefetch_related(
            Prefetch(
                "measurements",
                queryset=Measurement.objects.filter(metric=DECODE_TOK_S),
                to_attr="decode_measurements",
            )
        )
        .order_by("-created_at", "-id")[:limit]
    )
    for run in runs:
        run.decode = run.decode_measurements[0] if run.decode_measurements else None
    return runs


# --- runs ------------------------------------------------------------------------------


def run_queryset() -> QuerySet[Run]:
    return Run.objects.select_related("benchmark__engine_source", "variant", "build", "build__source", "triggered_by")


def run_measurements(*, run: Run) -> list[Measurement]:
    """The run's measurements, each with `.clean_samples` and `.flagged` ({flag: count}): a repeat
    the probe flagged (held back, burst) is never shown or used as a sample."""
    measurements = list(run.measurements.order_by("metric"))
    for m in measurements:
        m.clean_samples, m.flagged = split_samples(m)
    return measurements


def run_log_tail(*, run: Run, lines: int = LOG_TAIL_LINES) -> tuple[Artifact | None, str]:
    """The newest server_log artifact of the run and its last `lines` lines; without one, the
    live tail the worker sent while the run was active (artifact None); "" when neither."""
    artifact = (run.artifacts.filter(kind=Artifact.Kind.SERVER_LOG).exclude(file="")
                .order_by("-created_at", "-id").first())
    if artifact is None:
        return None, "\n".join(run.live_log.splitlines()[-lines:])
    try:
        text = read_tail(artifact.file, artifact.size, LOG_TAIL_BYTES)
    except ArtifactError as exc:  # the storage is away: the page still renders, and says so
        return artifact, f"[log not readable: {exc}]"
    return artifact, "\n".join(text.splitlines()[-lines:])


def run_artifacts(*, run: Run) -> list[Artifact]:
    """Artifacts (names, sizes and errors: their files stay in the storage)."""
    return list(run.artifacts.order_by("kind", "name"))


def heartbeat_age_s(run: Run) -> float | None:
    if run.heartbeat_at is None:
        return None
    return max(0.0, (timezone.now() - run.heartbeat_at).total_seconds())


def run_timings(*, run: Run) -> dict:
    """Seconds spent queued (created -> started) and running (started -> finished, or -> now)."""
    now = timezone.now()
    queued_s = ((run.started_at or run.finished_at or now) - run.created_at).total_seconds()
    running_s = None
    if run.started_at is not None:
        running_s = ((run.finished_at or now) - run.started_at).total_seconds()
    return {"queued_s": max(0.0, queued_s), "running_s": running_s if running_s is None else max(0.0, running_s)}


def _iso(value):
    return value.isoformat() if value is not None else None


def _build_status(build) -> dict | None:
    if build is None:
        return None
    return {"path": build.path, "commit": build.commit, "ref": build.ref, "base_commit": build.base_commit,
            "engine_version": build.engine_version, "duration_s": build.duration_s, "cache_hit": build.cache_hit}


def run_status(*, run: Run) -> dict:
    """The JSON the run page polls: state, phase, heartbeat, error, measurements."""
    return {
        "id": run.pk,
        "benchmark": run.benchmark.slug,
        "variant": {"id": run.variant_id, "name": run.variant.name, "position": run.variant.position},
        "batch": str(run.batch),
        "state": run.state,
        "is_final": run.is_final,
        "outcome": run.outcome,
        "outcome_final": run.outcome_final,
        "phase": run.phase,
        "heartbeat_at": _iso(run.heartbeat_at),
        "heartbeat_age_s": heartbeat_age_s(run),
        "worker_host": run.worker_host,
        "commit": run.commit,
        "ref": run.ref,
        "build": _build_status(run.build),
        "error": run.error,
        "failure_kind": run.failure_kind,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "notes": run.notes,
        "measurements": [
            {
                "metric": m.metric,
                "point": m.point or run.benchmark.default_point,  # the run's first point (runs/?point=: the others)
                "value": m.value,
                "unit": m.unit,
                "direction": m.direction,
                "ci_low": m.ci_low,
                "ci_high": m.ci_high,
                "samples": m.clean_samples,
                "all_samples": m.samples,
                "sample_flags": m.sample_flags,
                "details": m.details,
            }
            for m in run_measurements(run=run)
        ],
    }
