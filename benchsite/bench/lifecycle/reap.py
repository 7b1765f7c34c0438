"""The reaper: active runs whose worker went silent are failed, or queued again once."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchsite.metrics.instruments import RUNS_REAPED

from ..models import ReaperState, Run
from .fail import run_fail
from .requeue import run_requeue

log = logging.getLogger(__name__)


def reaper_listening_since(*, now=None):
    """Record a reaper tick; return since when the web side has been hearing heartbeats.

    A gap between ticks longer than half the heartbeat timeout (at least two reaper intervals)
    means the database or the web worker was away: heartbeats sent meanwhile still wait in the
    queue (retried with backoff), so silence before now proves nothing."""
    now = now or timezone.now()
    gap = timedelta(seconds=max(2 * settings.BENCH_REAPER_INTERVAL_S, settings.BENCH_HEARTBEAT_TIMEOUT_S / 2))
    with transaction.atomic():
        state, created = ReaperState.objects.select_for_update().get_or_create(
            id=1, defaults={"last_tick_at": now, "listening_since": now})
        if not created:
            if now - state.last_tick_at > gap:
                log.warning("reaper: no tick for %d s (database or web worker away): heartbeats are judged "
                            "from now on", (now - state.last_tick_at).total_seconds())
                state.listening_since = now
            state.last_tick_at = now
            state.save(update_fields=["last_tick_at", "listening_since"])
    return state.listening_since


def runs_reap_stale(*, now=None, listening_since=None) -> int:
    """Fail active runs whose worker stopped sending heartbeats (killed worker, lost host); with
    BENCH_REAPER_REQUEUE, a run on its first attempt is queued again instead. With
    LISTENING_SINCE (reaper_listening_since), only a silence heard for a whole timeout counts."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.BENCH_HEARTBEAT_TIMEOUT_S)
    if listening_since is not None and listening_since > cutoff:
        return 0
    reaped = 0
    for run in Run.objects.filter(state__in=Run.ACTIVE_STATES, heartbeat_at__lt=cutoff):
        age = int((now - run.heartbeat_at).total_seconds())
        message = (
            f"no heartbeat from worker {run.worker_host or '?'} for {age} s during phase "
            f"{run.phase!r}: the worker or its host was lost"
        )
        if settings.BENCH_REAPER_REQUEUE and run_requeue(run_id=run.id, reason=message, cutoff=cutoff):
            reaped += 1
            RUNS_REAPED.labels(action="requeued").inc()
            continue
        if run_fail(run_id=run.id, error=message, failure_kind=Run.FailureKind.WORKER):
            reaped += 1
            RUNS_REAPED.labels(action="failed").inc()
    return reaped
