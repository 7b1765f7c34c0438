"""The GPU side of a run: claim, execute the job with runners/, report back.

It imports no model and opens no database connection: a GPU host needs only the broker
URL. Everything it learns goes to the web queue as plain JSON messages.
"""
import logging
import socket
import threading

from celery.exceptions import SoftTimeLimitExceeded
from celery.exceptions import TimeoutError as ResultTimeout
from django.conf import settings

from runners.job import JobError, run_job

log = logging.getLogger(__name__)

CLAIM_TIMEOUT_S = 60
HEARTBEAT_INTERVAL_S = 20


class Reporter:
    """Sends phase changes and a periodic heartbeat for one run to the web queue."""

    def __init__(self, app, run_id: int):
        self.app, self.run_id = app, run_id
        self.phase = "claimed"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{run_id}", daemon=True)

    def send(self, task: str, *args) -> None:
        self.app.send_task(task, args=[self.run_id, *args], queue=settings.BENCH_WEB_QUEUE)

    def progress(self, phase: str, state: str | None = None) -> None:
        self.phase = phase
        self.send("bench.record_progress", phase, state)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            try:
                self.send("bench.record_progress", self.phase, None)
            except Exception:  # a broker hiccup must not kill the run; the next beat retries
                log.exception("heartbeat for run %s failed", self.run_id)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


def _claim(task, run_id: int) -> bool:
    host = socket.gethostname()
    reply = task.app.send_task(
        "bench.claim_run", args=[run_id, task.request.id or "", host], queue=settings.BENCH_WEB_QUEUE
    )
    try:
        return bool(reply.get(timeout=CLAIM_TIMEOUT_S, disable_sync_subtasks=False))
    except ResultTimeout:
        # The web side is down or slow: the run is still QUEUED, try again later.
        raise task.retry(countdown=30) from None


def execute(task, run_id: int, spec: dict) -> str:
    if not _claim(task, run_id):
        log.info("run %s was cancelled or taken by another worker: skipped", run_id)
        return "skipped"
    work_dir = settings.BENCH_WORK_DIR / f"run-{run_id}"
    with Reporter(task.app, run_id) as reporter:
        try:
            result = run_job(spec, work_dir=work_dir, report=reporter.progress)
        except JobError as exc:
            message, kind = str(exc), exc.failure_kind
            if isinstance(exc.__cause__, SoftTimeLimitExceeded):
                message, kind = f"time limit reached (the engine was stopped) during {message}", "timeout"
            reporter.send("bench.record_failure", message, exc.artifacts, kind, exc.build)
            return "failed"
        except SoftTimeLimitExceeded:
            reporter.send("bench.record_failure", f"time limit reached during phase {reporter.phase!r}", [], "timeout")
            return "failed"
        except Exception as exc:  # a bug in a probe must still end the run with a reason
            log.exception("run %s crashed", run_id)
            reporter.send("bench.record_failure", f"worker error: {type(exc).__name__}: {exc}", [], "worker")
            return "failed"
        reporter.send("bench.record_result", result)
    return "succeeded"
