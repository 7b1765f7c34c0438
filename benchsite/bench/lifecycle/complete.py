"""A worker's result: stored, judged and the run finished, in one transaction."""
import logging
import time
from functools import partial

from django.db import transaction
from django.utils import timezone

from benchsite.metrics.phases import observe_run
from runners.contract import JobResult

from ..models import Artifact, Measurement, Run
from .dispatch import pool_release_after
from .judge import judge_finished_run
from .progress import is_stale_execution
from .results import artifacts_discard, artifacts_store, build_record

log = logging.getLogger(__name__)


def run_complete(*, run_id: int, result: JobResult | dict, task_id: str = "") -> bool:
    """Store a worker's result, judge it and finish the run, in one transaction; False if the run
    was no longer active. Idempotent: a message delivered again (a retry after a database error,
    a redelivery) deletes no file that a stored row points to, and a finished run whose verdicts
    are still missing is judged again (judge.judge_finished_run)."""
    result = result if isinstance(result, JobResult) else JobResult.from_dict(result)
    began = time.monotonic()
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run_id)
        if run.state not in Run.ACTIVE_STATES or is_stale_execution(run, task_id):
            if run.state not in Run.ACTIVE_STATES:
                log.warning("result for run %s ignored: it is %s", run_id, run.state)
            if run.state == Run.State.SUCCEEDED and run.judged_at is None and run.task_id == task_id:
                judge_finished_run(run, compare=False)
            artifacts = [a.to_dict() for a in result.artifacts]
            transaction.on_commit(partial(artifacts_discard, run_id, artifacts))
            return False
        _store_result(run, result)
        if run.artifacts.filter(kind=Artifact.Kind.SERVER_LOG).exclude(file="").exists():
            Run.objects.filter(id=run.id).update(live_log="")  # the stored log replaces the live tail
        judge_finished_run(run)
        pool_release_after(run)
        # once committed: a rolled-back attempt (retried later) is not counted twice
        transaction.on_commit(lambda: observe_run(result, pool=run.benchmark.gpu_pool,
                                                  storing_s=time.monotonic() - began))
    return True


def _store_result(run: Run, result: JobResult) -> None:
    """The result's measurements, artifacts, build and host on RUN, which succeeds."""
    default_point = run.benchmark.default_point  # an older worker's, and a point-less probe's, figures
    for m in result.measurements:
        point = m.point or default_point
        Measurement.all_points.update_or_create(run=run, metric=m.metric, point=point, defaults={
            "first_point": point == default_point, "value": m.value, "unit": m.unit, "direction": m.direction, "samples": m.samples,
            "sample_flags": m.clean_sample_flags(), "ci_low": m.ci_low, "ci_high": m.ci_high, "details": m.details})
    artifacts_store(run, [a.to_dict() for a in result.artifacts])
    build_record(run, result.build)
    if result.host is not None:
        run.host_info = result.host.to_dict()
        run.host_fingerprint = result.host.fingerprint[:300]
    run.state = Run.State.SUCCEEDED
    run.phase = "done"
    run.finished_at = run.heartbeat_at = timezone.now()
    run.took_effect = result.took_effect.to_dict() if result.took_effect is not None else {}
    run.notes = [note[:2000] for note in result.notes[:100]]
    run.save(update_fields=["state", "phase", "finished_at", "heartbeat_at", "took_effect", "notes", "host_info",
                            "host_fingerprint"])
