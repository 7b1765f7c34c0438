"""Which GPU pools a worker serves, and where a queued run stands in its pool's queue.

GPU workers say which pools they serve every BENCH_HEARTBEAT_INTERVAL_S (gpu_worker.py,
task bench.record_worker): a pool none of whose workers spoke within
BENCH_WORKER_SEEN_TIMEOUT_S is not served, and a trigger on it needs a confirmation.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Max
from django.utils import timezone

from ..models import PoolWorker, Run


def pool_workers_seen(*, worker: str, pools: list[str]) -> None:
    now = timezone.now()
    for pool in pools:
        PoolWorker.objects.update_or_create(pool=pool, worker=worker[:200], defaults={"last_seen_at": now})


def pool_status(pool: str) -> dict:
    """{"pool", "served", "last_seen_at", "workers", "message"}: served when a worker of the pool
    spoke within BENCH_WORKER_SEEN_TIMEOUT_S; the message says who, or since when nobody."""
    now = timezone.now()
    seen = PoolWorker.objects.filter(pool=pool)
    live_since = now - timedelta(seconds=settings.BENCH_WORKER_SEEN_TIMEOUT_S)
    workers = sorted(seen.filter(last_seen_at__gte=live_since).values_list("worker", flat=True))
    last = seen.aggregate(last=Max("last_seen_at"))["last"]
    if workers:
        message = f"pool {pool} is served by {', '.join(workers)}"
    elif last is None:
        message = f"no worker has ever served pool {pool}: never seen"
    else:
        message = f"no worker has served pool {pool} since {last:%Y-%m-%d %H:%M:%S} UTC ({_ago(now - last)} ago)"
    return {"pool": pool, "served": bool(workers), "last_seen_at": last.isoformat() if last else None,
            "workers": workers, "message": message}


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h" if seconds < 172800 else f"{seconds // 86400} days"


def pool_queue(pool: str):
    """The pool's QUEUED runs in the order its workers will get them: the ones already sent (in
    the order sent), then the held ones in the order they will be released."""
    return (Run.objects.filter(state=Run.State.QUEUED, benchmark__gpu_pool=pool)
            .order_by(F("sent_at").asc(nulls_last=True), "priority", "created_at", "id"))


def run_queue(run: Run) -> dict | None:
    """A queued run's place in its pool's queue (1 = next) and the pool's status; None once it left."""
    if run.state != Run.State.QUEUED:
        return None
    pool = run.benchmark.gpu_pool
    order = list(pool_queue(pool).values_list("id", flat=True))
    if run.id not in order:  # it left the queue since it was read
        return None
    return {"position": order.index(run.id) + 1, "length": len(order), **pool_status(pool)}
