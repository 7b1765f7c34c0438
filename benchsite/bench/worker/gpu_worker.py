"""The GPU side of a run: claim, execute the job with runners/, report back.

It imports no model and opens no database connection: a GPU host needs only the broker
URL and the artifact storage (bench/storage/artifacts.py), where it writes logs and traces itself.
Everything else it learns goes to the web queue as the contract's messages (runners.messages).
"""
import logging
import socket
import threading
import time

from celery import signals
from celery.exceptions import SoftTimeLimitExceeded
from celery.exceptions import TimeoutError as ResultTimeout
from django.conf import settings
from kombu import Exchange, Queue

from runners.config import RunnerConfig
from runners.engine import orphans
from runners.contract import RECORD_HOST_HEALTH, ArtifactRef
from runners.envvars import EnvVarError
from runners.probes.health import BatchHealthCheck
from runners.hostinfo import fingerprint, host_info, host_queue
from runners.job import JobError, run_job
from runners.messages import MAX_ERROR_CHARS, Claim, Completion, Heartbeat, JobFailure, Progress, WorkerMessage
from runners.outputs.livelog import LiveLog

from ..storage.artifacts import STORING_PHASE, store_all

log = logging.getLogger(__name__)



class Reporter:
    """Sends phase changes, a periodic heartbeat and the job's growing log tail (every
    BENCH_LOG_INTERVAL_S while it grows) for one run to the web queue."""

    def __init__(self, app, run_id: int, task_id: str = ""):
        self.app, self.run_id, self.task_id = app, run_id, task_id
        self.phase = "claimed"
        self.live = LiveLog()
        self._sent_log = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{run_id}", daemon=True)

    def send(self, message: WorkerMessage) -> None:
        send_message(self.app, message)

    def send_final(self, message: Completion | JobFailure) -> None:
        """A result or failure must arrive: while the broker is away (restart, network), keep
        trying with backoff for up to BENCH_RESULT_SEND_TIMEOUT_S."""
        deadline = time.monotonic() + settings.BENCH_RESULT_SEND_TIMEOUT_S
        attempt = 0
        while True:
            try:
                self.send(message)
                if attempt:
                    log.warning("run %s: %s delivered after %d retries", self.run_id, message.TASK, attempt)
                return
            except Exception as exc:  # kombu OperationalError, redis ConnectionError, socket errors
                attempt += 1
                if time.monotonic() > deadline:
                    raise
                log.warning("run %s: %s waits for the broker (attempt %d): %s", self.run_id, message.TASK, attempt,
                            exc)
                time.sleep(min(10.0, 0.5 * attempt))

    def fail(self, error: str, artifacts: list[dict] | None = None, kind: str = "worker",
             build: dict | None = None) -> str:
        """Send the run's failure (it must arrive, as a result must); an error longer than the
        web side keeps is cut, so that the run still fails with its reason."""
        self.send_final(JobFailure(run_id=self.run_id, error=error[:MAX_ERROR_CHARS], artifacts=artifacts or [],
                                   failure_kind=kind, build=build, task_id=self.task_id))
        return "failed"

    def progress_message(self, log_tail: str | None = None, state: str | None = None) -> Progress:
        # task_id: the web side ignores messages of an execution that is no longer the run's own
        return Progress(run_id=self.run_id, phase=self.phase, state=state, task_id=self.task_id, log_tail=log_tail)

    def progress(self, phase: str, state: str | None = None) -> None:
        self.phase = phase
        try:
            self.send(self.progress_message(state=state))
        except Exception:  # a lost phase message costs a label, not the run; heartbeats go on
            log.exception("progress of run %s not sent", self.run_id)

    def send_log(self) -> bool:
        """A heartbeat that carries the log's tail, when it changed since the last one sent.
        Only then the message has `log_tail`: an older web side drops it and keeps the others."""
        text = self.live.text()
        if text == self._sent_log:
            return False
        self.send(self.progress_message(log_tail=text))
        self._sent_log = text
        return True

    def _beat(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(min(settings.BENCH_LOG_INTERVAL_S, settings.BENCH_HEARTBEAT_INTERVAL_S)):
            try:
                if self.send_log():
                    last_beat = time.monotonic()
                elif time.monotonic() - last_beat >= settings.BENCH_HEARTBEAT_INTERVAL_S:
                    self.send(self.progress_message())
                    last_beat = time.monotonic()
            except Exception:  # a broker hiccup must not kill the run; the next beat retries
                log.exception("heartbeat for run %s failed", self.run_id)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


def send_message(app, message: WorkerMessage):
    """MESSAGE to the web queue in its wire form (only the arguments that differ from their
    defaults by name: an older web side takes the ones it knows)."""
    args, kwargs = message.task_args()
    return app.send_task(message.TASK, args=args, kwargs=kwargs, queue=settings.BENCH_WEB_QUEUE)


def _claim(task, run_id: int) -> bool:
    reply = send_message(task.app, Claim(run_id=run_id, task_id=task.request.id or "",
                                         worker_host=socket.gethostname(), attempt=task.request.retries or 0))
    timeout_s = settings.BENCH_CLAIM_TIMEOUT_S
    try:
        return bool(reply.get(timeout=timeout_s, disable_sync_subtasks=False))
    except ResultTimeout:
        # The web side (or its database) is away: try again later. This claim may still land
        # when it returns; the retry's claim then takes the run over (lifecycle/claim.run_claim).
        raise task.retry(countdown=timeout_s / 2) from None


def _store(reporter: Reporter, artifacts: list[dict], failed: bool = False) -> list[dict]:
    """Stream the job's files into the artifact storage (the same one the web reads); only
    references go through the broker. One that cannot be stored (disk full) says why, and
    the run's measurements still go. A failed run keeps the phase it failed in."""
    if artifacts and not failed:
        reporter.progress(STORING_PHASE)
    return store_all(reporter.run_id, artifacts)


_HEALTH = BatchHealthCheck()  # one per worker process: the first run of each batch pays for the check


def runner_config() -> RunnerConfig:
    """The runners' settings (runners/config.py) for one task: the worker's environment, with its
    work folder and the engine records under it (orphans.py) from the Django settings."""
    config = RunnerConfig.from_env(work_dir=settings.BENCH_WORK_DIR)
    return config.replace(engine_record_dir=config.engine_record_dir or settings.BENCH_WORK_DIR / "engines")


def _health_check(task, reporter: Reporter, batch: str, config: RunnerConfig) -> None:
    """The comm probe as a host health check before a batch (runners/probes/health.py); its figure goes
    to the web side, which flags a host that drifted. It never costs the run."""
    try:
        if _HEALTH.enabled_for(batch, config):
            reporter.progress("comm health check")
            doc = _HEALTH.before_run(batch, config)
            if doc is not None:
                task.app.send_task(RECORD_HOST_HEALTH, args=[{**doc, "fingerprint": fingerprint(host_info())}],
                                   queue=settings.BENCH_WEB_QUEUE)
    except Exception:  # the broker away: the run goes on without the figure
        log.exception("comm health check before run %s not recorded", reporter.run_id)


def execute(task, run_id: int, spec: dict, batch: str = "") -> str:
    if not _claim(task, run_id):
        log.info("run %s was cancelled or taken by another worker: skipped", run_id)
        return "skipped"
    work_dir = settings.BENCH_WORK_DIR / f"run-{run_id}"
    with Reporter(task.app, run_id, task.request.id or "") as reporter:
        try:
            config = runner_config()
        except EnvVarError as exc:  # a bad setting on this host: the run says which
            return reporter.fail(f"worker error: {type(exc).__name__}: {exc}")
        _health_check(task, reporter, batch, config)
        try:
            result = run_job(spec, work_dir=work_dir, report=reporter.progress, live=reporter.live,
                             runner_config=config)
        except JobError as exc:
            message, kind = str(exc), exc.failure_kind
            if isinstance(exc.__cause__, SoftTimeLimitExceeded):
                message, kind = f"time limit reached (the engine was stopped) during {message}", "timeout"
            return reporter.fail(message, _store(reporter, exc.artifacts, failed=True), kind, exc.build)
        except SoftTimeLimitExceeded:
            return reporter.fail(f"time limit reached during phase {reporter.phase!r}", kind="timeout")
        except Exception as exc:  # a bug in a probe must still end the run with a reason
            log.exception("run %s crashed", run_id)
            return reporter.fail(f"worker error: {type(exc).__name__}: {exc}")
        stored = _store(reporter, [artifact.to_dict() for artifact in result.artifacts])
        result.artifacts = [ArtifactRef.from_dict(artifact) for artifact in stored]
        # The result carries the machine's fingerprint (GPU model and count, driver, CPU): verdicts compare within it.
        reporter.send_final(Completion(run_id=run_id, result=result, task_id=reporter.task_id))
    return "succeeded"


@signals.celeryd_after_setup.connect
def _consume_host_queues(sender=None, instance=None, **kwargs) -> None:
    """Each gpu.<pool> queue this worker serves gets a twin for this host alone, so that a run can
    be sent to one chosen host of the pool (a confirmation re-run on another machine)."""
    queues = instance.app.amqp.queues
    for name in list(queues.consume_from):
        if name.startswith("gpu.") and ".host." not in name:
            mine = host_queue(name, socket.gethostname())
            queues.select_add(Queue(mine, Exchange(mine), routing_key=mine))  # as send_task(queue=...) makes it


def served_pools(queues) -> list[str]:
    """The pools of the gpu.<pool> queues a worker consumes (not its per-host twins)."""
    return sorted(name.removeprefix("gpu.") for name in queues if name.startswith("gpu.") and ".host." not in name)


@signals.worker_ready.connect
def _announce_pools(sender=None, **kwargs) -> None:
    """Tell the web side, now and every BENCH_HEARTBEAT_INTERVAL_S, which pools this worker
    serves: a trigger on a pool nobody serves then says so instead of queueing in silence."""
    pools = served_pools(sender.app.amqp.queues.consume_from) if sender is not None else []
    if not pools:
        return
    name = getattr(sender, "hostname", "") or socket.gethostname()

    def beat() -> None:
        while True:
            try:
                send_message(sender.app, Heartbeat(worker=name, pools=pools))
            except Exception:  # the broker away: the next beat tries again
                log.exception("pool heartbeat of %s not sent", name)
            time.sleep(settings.BENCH_HEARTBEAT_INTERVAL_S)

    threading.Thread(target=beat, name="pool-heartbeat", daemon=True).start()


@signals.worker_ready.connect
def _reap_orphaned_engines(sender=None, **kwargs) -> None:
    """A GPU worker starting after a kill stops the engines its dead predecessor left behind, so
    that the next run has the GPU (or CPU) to itself."""
    queues = sender.app.amqp.queues.consume_from if sender is not None else {}
    if not any(name.startswith("gpu.") for name in queues):
        return
    try:
        directory = runner_config().engine_record_dir
    except EnvVarError as exc:  # each run will say so too
        log.error("orphaned engines not looked for: %s", exc)
        return
    for record in orphans.orphans_reap(directory, grace_s=settings.BENCH_ORPHAN_GRACE_S, log=log.warning):
        log.warning("orphaned engine group %s handled (%s processes were running)", record["pgid"], record["members"])
