"""The fault-injection harness shared by tests/faults and benchmarks/faults.py: a private Redis
that can be killed and restarted, real Celery workers (web with beat, GPU) that can be killed,
and a benchmark whose variants drive the fake engine (fake_engine.py: a real process group).

Nothing here touches the shared Redis or PostgreSQL: faults are injected into our own copies.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, Workers, _die_with_parent

FAKE_ENGINE = Path(__file__).resolve().parent / "fake_engine.py"

# Short clocks so that each fault plays out in seconds (production: 20 s beats, 300 s timeout).
FAULT_ENV = {
    "BENCH_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}",
    "BENCH_ENGINE_CPU": "0",
    "BENCH_ENGINE_PASS_ENV": "FAKE_ENGINE_*",  # the fake engine's switches set on the worker reach it
    "BENCH_HEARTBEAT_INTERVAL_S": "1",
    "BENCH_HEARTBEAT_TIMEOUT_S": "4",
    "BENCH_REAPER_INTERVAL_S": "1",
    "BENCH_PROBE_TIMEOUT_S": "2",
    "BENCH_REQUEUE_LOST_AFTER_S": "2",
    "BENCH_ORPHAN_GRACE_S": "2",
    "BENCH_ENGINE_GUARD_GRACE_S": "2",
    "BENCH_RESULT_SEND_TIMEOUT_S": "120",
    "BENCH_DB_RETRY_BACKOFF_MAX_S": "2",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of our own, without persistence: a restart loses every message, like a
    broker host that was replaced."""

    def __init__(self, work_dir: Path):
        self.port = free_port()
        self.dir = work_dir / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        log = open(self.dir / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)], stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"private redis on port {self.port} did not start: {(self.dir / 'redis.log').read_text()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class FaultWorkers(Workers):
    """The service's workers with the fault clocks, the fake engine and, on the web worker,
    the real beat (reaper and re-queue of lost runs)."""

    def __init__(self, broker_url: str, database_url: str, log_dir: Path, extra_env: dict | None = None):
        super().__init__(broker_url, database_url, log_dir, pool="cpu")
        self.env.update(FAULT_ENV)
        for key, value in (extra_env or {}).items():  # None: leave the variable unset (the real engine)
            if value is None:
                self.env.pop(key, None)
            else:
                self.env[key] = value
        self.work_dir = log_dir / "work"
        self.engine_pids = log_dir / "engine-pids"
        self.env["FAKE_ENGINE_PIDS"] = str(self.engine_pids)

    def start(self, name: str, queues: str, beat: bool = False) -> None:
        log = open(self.log_dir / f"worker-{name}.log", "ab")
        cmd = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", queues, "-c", "1",
               "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
        if beat:
            cmd += ["-B", "--schedule", str(self.log_dir / "beat-schedule")]
        self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            process_group=0, preexec_fn=_die_with_parent)

    def start_service(self) -> None:
        self.start("web", "web", beat=True)
        self.start("gpu", "gpu.cpu")

    def kill(self, name: str) -> None:
        """SIGKILL the worker's whole process group (main process and pool child)."""
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(timeout=10)

    def engine_records(self) -> list[dict]:
        directory = self.work_dir / "engines"
        return [json.loads(p.read_text()) for p in sorted(directory.glob("engine-*.json"))] if directory.is_dir() else []

    def last_engine_pid(self) -> int | None:
        lines = self.engine_pids.read_text().split() if self.engine_pids.exists() else []
        return int(lines[-1]) if lines else None

    def stop(self) -> None:
        super().stop()
        self._kill_leftover_engines()

    def _kill_leftover_engines(self) -> None:
        """A failed scenario may leave a fake engine behind: never let it outlive the test."""
        pids = self.engine_pids.read_text().split() if self.engine_pids.exists() else []
        for pid in map(int, pids):
            if process_alive(pid):
                try:
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def ready(self, name: str) -> bool:
        return " ready." in self.log(name)


def group_alive(pgid: int) -> bool:
    from runners.engine.guard import group_alive as alive

    return alive(pgid)


def process_alive(pid: int) -> bool:
    """True while PID runs (a zombie waiting for its parent holds nothing and counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def wait_until(predicate, timeout_s: float, what: str, explain=None, interval_s: float = 0.2):
    """Poll PREDICATE; return (value, seconds taken) or raise AssertionError with EXPLAIN()."""
    t0 = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value, time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            message = f"timed out after {timeout_s:.0f} s waiting for {what}"
            raise AssertionError(f"{message}\n{explain()}" if explain else message)
        time.sleep(interval_s)


def fault_benchmark(gate: Path):
    """A benchmark on the fake engine; each variant is one behaviour (its env reaches the engine)."""
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Benchmark

    benchmark = Benchmark.objects.create(
        name="faults", slug="faults", model="/nonexistent/fault-model", gpu_pool="cpu", prompt="fault",
        max_tokens=8, repeats=1, warmup=1, startup_timeout_s=90, time_limit_s=180)
    variants = {
        "ok": {},
        "slow": {"FAKE_ENGINE_TOKEN_S": "0.5"},  # ~4 s per request: a run that stays RUNNING ~10 s
        "hang": {"FAKE_ENGINE_MODE": "hang"},
        "exit": {"FAKE_ENGINE_MODE": "exit"},
        "gated": {"FAKE_ENGINE_GATE": str(gate)},  # the engine starts once this file exists
    }
    for name, env in variants.items():
        trigger.variant_create(benchmark=benchmark, name=name, env=env)
    return benchmark


def point_app_at(broker_url: str, visibility_timeout_s: int = 3600):
    """This process's Celery app (it enqueues and revokes) on the private broker; returns the
    previous settings for restore_app()."""
    from benchsite.celery import app
    from tests.conftest import _point_app_at

    saved = app.conf.broker_url, app.conf.result_backend, app.conf.broker_transport_options
    _set_backend(app, broker_url)
    _point_app_at(app, broker_url, broker_url, {"visibility_timeout": visibility_timeout_s})
    return saved


def _set_backend(app, url: str) -> None:
    # conf reads the Django-namespaced name first: set both, then forget the built backend
    app.conf.CELERY_RESULT_BACKEND = app.conf.result_backend = url
    backend = app._local.__dict__.pop("backend", None)
    consumer = getattr(backend, "result_consumer", None)
    if consumer is not None and getattr(consumer, "_pubsub", None) is not None:
        consumer._pubsub.close()  # else it keeps reconnecting to a Redis that is gone


def restore_app(saved) -> None:
    from benchsite.celery import app
    from tests.conftest import _point_app_at

    _set_backend(app, saved[1])
    _point_app_at(app, *saved)


def proxied_database_url(database_url: str):
    """A started TcpProxy in front of DATABASE_URL's PostgreSQL, and the URL that goes through it."""
    from urllib.parse import urlsplit, urlunsplit

    from .tcp_proxy import TcpProxy

    parts = urlsplit(database_url)
    if not parts.scheme.startswith("postgres"):
        raise ValueError(f"a database outage is injected through a TCP proxy to PostgreSQL, not {parts.scheme!r}")
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    proxy.start()
    auth = parts.netloc.rpartition("@")[0]
    netloc = f"{auth}@127.0.0.1:{proxy.port}" if auth else f"127.0.0.1:{proxy.port}"
    return proxy, urlunsplit(parts._replace(netloc=netloc))


class FullDisk:
    """A real tmpfs (1 MiB unless told), filled to the last byte: the artifact storage on a full
    disk (a write fails with ENOSPC from the kernel). Mounting needs root, as the suite and CI
    run. As a context manager it is mounted full; mount(), fill() and free() play a disk that
    fills up and is cleared while the service runs."""

    def __init__(self, path: Path, size: str = "1m"):
        self.path, self.size = path, size

    def __enter__(self) -> "FullDisk":
        self.mount()
        self.fill()
        return self

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size}", "tmpfs", str(self.path)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            raise AssertionError(f"cannot mount a {self.size} tmpfs for the full-disk fault (needs root): "
                                 f"{mounted.stderr.strip()}")

    def fill(self) -> None:
        try:
            with open(self.path / "filler", "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
        except OSError:  # ENOSPC: full (a last partial block may still fit below 64 KiB)
            pass
        try:
            with open(self.path / "filler-tail", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            pass

    def free(self) -> None:
        for name in ("filler", "filler-tail"):
            (self.path / name).unlink(missing_ok=True)

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.is_file())

    def __exit__(self, *exc) -> None:
        subprocess.run(["umount", str(self.path)], check=True)
