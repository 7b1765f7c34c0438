"""The figures read from the database at scrape time, in a constant number of small queries:
none of them reads every run (the run counts come from RunCount, kept by database triggers; the
queue from the queued runs only, through the state index)."""
import shutil
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Min, OuterRef, Subquery, Sum
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from benchsite.bench.models import Benchmark, PoolWorker, Run, SeriesRollup

from .models import RunCount

# A fresh database has no benchmark: its pool is the one a new benchmark gets.
DEFAULT_POOL = Benchmark._meta.get_field("gpu_pool").default


def pools() -> list[str]:
    """Every pool a benchmark runs on or a worker serves (one query)."""
    benchmarks = Benchmark.objects.order_by().values_list("gpu_pool", flat=True)
    workers = PoolWorker.objects.order_by().values_list("pool", flat=True)
    return sorted(set(benchmarks.union(workers)) or {DEFAULT_POOL})


def run_counts() -> dict[tuple[str, str, str], int]:
    """(state, pool, trigger) -> runs, the pool being each benchmark's now (one query)."""
    pool = Subquery(Benchmark.objects.filter(id=OuterRef("benchmark_id")).values("gpu_pool"))
    rows = (RunCount.objects.annotate(pool=pool).filter(pool__isnull=False)
            .values("state", "pool", "trigger").annotate(runs=Sum("n")).order_by())
    return {(r["state"], r["pool"], r["trigger"]): r["runs"] for r in rows}


def queues() -> dict[str, tuple[int, object]]:
    """pool -> (queued runs, the oldest one's creation); reads only the queued runs (one query)."""
    rows = (Run.objects.filter(state=Run.State.QUEUED).values("benchmark__gpu_pool")
            .annotate(n=Count("id"), oldest=Min("created_at")).order_by())
    return {r["benchmark__gpu_pool"]: (r["n"], r["oldest"]) for r in rows}


class DatabaseCollector:
    """Gauges of what is there now: runs, queues, workers, chart series (the database), the artifact disk."""

    def collect(self):
        now = timezone.now()
        known_pools, counts, queued = pools(), run_counts(), queues()
        all_pools = sorted(set(known_pools) | {pool for _, pool, _ in counts} | set(queued))
        yield self._runs(all_pools, counts)
        yield from self._queues(all_pools, queued, now)
        yield self._workers(now)
        yield from self._rollups(now)
        yield from self._artifacts_disk()

    @staticmethod
    def _runs(all_pools, counts) -> GaugeMetricFamily:
        runs = GaugeMetricFamily("decode_bench_runs", "Runs by state, pool and trigger (every run stored).",
                                 labels=["state", "pool", "trigger"])
        # Every combination, zero included: a series that appears only once non-zero breaks rate() and alerts.
        for state in Run.State.values:
            for pool in all_pools:
                for trigger in Run.Trigger.values:
                    runs.add_metric([state, pool, trigger], counts.get((state, pool, trigger), 0))
        return runs

    @staticmethod
    def _queues(all_pools, queued, now):
        length = GaugeMetricFamily("decode_bench_queue_length", "Runs waiting (QUEUED) per pool.", labels=["pool"])
        age = GaugeMetricFamily("decode_bench_queue_oldest_age_seconds", "Seconds since the oldest queued run of "
                                "the pool was triggered; 0 with none queued.", labels=["pool"])
        for pool in all_pools:
            n, oldest = queued.get(pool, (0, None))
            length.add_metric([pool], n)
            age.add_metric([pool], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        yield length
        yield age

    @staticmethod
    def _workers(now) -> GaugeMetricFamily:
        seen = GaugeMetricFamily("decode_bench_worker_last_seen_seconds", "Seconds since each GPU worker's last "
                                 "heartbeat for a pool it serves.", labels=["pool", "worker"])
        for pool, worker, last_seen_at in PoolWorker.objects.order_by().values_list("pool", "worker", "last_seen_at"):
            seen.add_metric([pool, worker], max(0.0, (now - last_seen_at).total_seconds()))
        return seen

    @staticmethod
    def _rollups(now):
        stale = SeriesRollup.objects.filter(stale=True).aggregate(n=Count("id"), oldest=Min("built_at"))
        yield GaugeMetricFamily("decode_bench_rollup_stale", "Chart series marked stale, waiting for a rebuild.",
                                value=stale["n"])
        lag = (now - stale["oldest"]).total_seconds() if stale["oldest"] else 0.0
        yield GaugeMetricFamily("decode_bench_rollup_lag_seconds", "Age of the oldest stale chart series' last "
                                "build: how far the charts lag behind the runs; 0 with none stale.", value=max(0.0, lag))

    @staticmethod
    def _artifacts_disk():
        """The artifact folder's disk (filesystem storage only: a bucket has its own monitoring)."""
        if settings.BENCH_ARTIFACTS_BACKEND != "filesystem":
            return
        folder = Path(settings.BENCH_ARTIFACTS_DIR)
        while not folder.exists() and folder != folder.parent:  # not made yet: the disk it will be on
            folder = folder.parent
        try:
            usage = shutil.disk_usage(folder)
        except OSError:  # unreadable: no figure rather than a failed scrape
            return
        yield GaugeMetricFamily("decode_bench_artifacts_disk_free_bytes", "Free bytes on the disk of "
                                "BENCH_ARTIFACTS_DIR.", value=usage.free)
        yield GaugeMetricFamily("decode_bench_artifacts_disk_size_bytes", "Size in bytes of the disk of "
                                "BENCH_ARTIFACTS_DIR.", value=usage.total)
