"""Shared fixtures: real Celery workers on the real Redis broker, and a demo benchmark."""
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import kombu.pools
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
# Byte code is written by the first process that imports a module (nothing is compiled at
# install): where the shell sets PYTHONDONTWRITEBYTECODE=1, as these machines do, every engine,
# worker and CLI the tests start would compile vLLM and Django from source again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def _test_redis_url() -> str:
    """A Redis database of its own for each pytest process: xdist workers and the SQLite and
    PostgreSQL passes may run at the same time, and their Celery workers must not take each
    other's tasks (db 15, 14, ... on SQLite; 11, 10, ... on PostgreSQL). BENCH_TEST_REDIS_URL
    names the first one (e.g. redis://127.0.0.1:6379/4): xdist worker gwN takes the Nth after it
    (4, 5, ...), since two processes on one database flush and take each other's tasks."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    if os.environ.get("BENCH_TEST_REDIS_URL"):
        base, _, db = os.environ["BENCH_TEST_REDIS_URL"].rstrip("/").rpartition("/")
        if not db.isdigit() or base.endswith("/"):  # no database number: database 0
            base, db = os.environ["BENCH_TEST_REDIS_URL"].rstrip("/"), "0"
        if int(db) + worker > 15:
            raise pytest.UsageError(f"BENCH_TEST_REDIS_URL: xdist worker gw{worker} would need Redis database "
                                    f"{int(db) + worker} (0-15): name a lower first one")
        return f"{base}/{int(db) + worker}"
    first = 11 if os.environ.get("DATABASE_URL", "").startswith("postgres") else 15
    return f"redis://127.0.0.1:6379/{first - worker % 4}"


TEST_REDIS_URL = _test_redis_url()


def _database_url(settings_dict) -> str:
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}/{settings_dict['NAME']}"


COLLECTED_FILES = pytest.StashKey[set]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests that use a database, so the PostgreSQL pass runs those and not the
    pure-Python ones (`pytest -m database`). The PostgreSQL pass's engine tests (the end-to-end
    runs, minutes) go first among the transactional tests: pytest-django's order, which comes
    after this, keeps them behind the tests on a rolled-back database. The files collected, before
    `-m` or `-k` leaves any out, are kept for tests/test_collection.py."""
    config.stash[COLLECTED_FILES] = {Path(item.path) for item in items}
    items.sort(key=lambda item: not (item.get_closest_marker("engine") and item.get_closest_marker("postgres_pass")))
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("django_db") or fixtures & {"db", "transactional_db", "live_server"}:
            item.add_marker(pytest.mark.database)
        if "browser" in fixtures:  # pages and scripts in Chromium: the SQLite pass runs them, once
            item.add_marker(pytest.mark.browser)
        if "shared_engine" in fixtures:  # under xdist, the one shared engine lives in one worker
            item.add_marker(pytest.mark.xdist_group("shared-engine"))
        # An engine start or a Celery round trip takes longer than the default limit; a hang
        # still fails within minutes.
        if not item.get_closest_marker("timeout"):
            if item.get_closest_marker("engine"):
                item.add_marker(pytest.mark.timeout(420))
            elif "celery_workers" in fixtures:
                item.add_marker(pytest.mark.timeout(300))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from runners.synthetic.tiny_model import build_tiny_model

    path = Path(os.environ.get("BENCH_TINY_MODEL_DIR") or tmp_path_factory.mktemp("tiny-model"))
    build_tiny_model(path)  # a no-op when the Makefile already built it
    return path


def _point_app_at(app, broker_url, result_backend, transport_options):
    """Switch the in-process Celery app's broker (its pools are built lazily from conf)."""
    app.conf.broker_url, app.conf.result_backend = broker_url, result_backend
    app.conf.broker_read_url = app.conf.broker_write_url = broker_url  # derived once at start-up
    app.conf.broker_transport_options = transport_options
    kombu.pools.reset()  # closes and forgets every pooled connection, so new ones use the new URL
    app._pool = None
    app.amqp._producer_pool = None
    app._local.__dict__.pop("backend", None)


@pytest.fixture
def sent(monkeypatch):
    """Tasks sent to the broker, recorded instead of sent (for tests that need no broker)."""
    calls = []

    class Result:
        id = "task-1"

    def send_task(name, args=None, **options):
        calls.append((name, args, options))
        return Result()

    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", send_task)
    return calls


@pytest.fixture
def redis_broker():
    """A clean Redis database used as broker and result backend by this process and the workers."""
    client = redis.Redis.from_url(TEST_REDIS_URL)
    client.flushdb()
    from benchsite.celery import app

    saved = app.conf.broker_url, app.conf.result_backend, app.conf.broker_transport_options
    _point_app_at(app, TEST_REDIS_URL, TEST_REDIS_URL, {"visibility_timeout": 3600})
    yield TEST_REDIS_URL
    _point_app_at(app, *saved)
    client.flushdb()


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    """A worker left behind by a killed pytest would take the next session's tasks."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class Workers:
    """The service's two real Celery workers, as `make run` and docker-compose start them."""

    def __init__(self, broker_url: str, database_url: str, log_dir: Path, pool: str):
        self.env = {
            **os.environ,
            "CELERY_BROKER_URL": broker_url,
            "CELERY_RESULT_BACKEND": broker_url,
            "DATABASE_URL": database_url,
            "BENCH_WORK_DIR": str(log_dir / "work"),
            "PYTHONUNBUFFERED": "1",
            "CELERY_SKIP_CHECKS": "1",  # Django's system checks (0.4 s a start): `manage.py check` has its own test
        }
        self.log_dir, self.pool = log_dir, pool
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, queues: str) -> None:
        log = open(self.log_dir / f"worker-{name}.log", "ab")
        cmd = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-Q", queues, "-c", "1",
               "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
        self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            process_group=0, preexec_fn=_die_with_parent)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def log(self, name: str) -> str:
        return (self.log_dir / f"worker-{name}.log").read_text(errors="replace")

    def tails(self, chars: int = 4000) -> str:
        """The end of every worker's log, for a failed wait."""
        return "\n".join(f"--- worker {name} log ---\n{self.log(name)[-chars:]}" for name in self.procs)

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None


@pytest.fixture
def celery_workers(redis_broker, transactional_db, tmp_path):
    """A web-queue worker and a GPU worker for pool `cpu`, against the test database."""
    from django.db import connection

    workers = Workers(redis_broker, _database_url(connection.settings_dict), tmp_path, pool="cpu")
    workers.start("web", "web")
    workers.start("gpu", "gpu.cpu")
    yield workers
    workers.stop()


def wait_for(predicate, timeout_s: float, interval_s: float = 1.0, what: str = "condition", explain=None):
    """Poll until PREDICATE is truthy; on time-out fail with EXPLAIN() (e.g. the workers' logs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    message = f"timed out after {timeout_s:.0f} s waiting for {what}"
    raise AssertionError(f"{message}\n{explain()}" if explain else message)


# The arguments every test engine on the tiny model uses: eager, float32, small caches.
TEST_ENGINE_ARGS = ["--enforce-eager", "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"]


@pytest.fixture(scope="session")
def shared_engine(tiny_model_dir, tmp_path_factory):
    """One real `vllm serve` (TP=1, unpatched) for every test that only reads from an engine.

    Tests must not stop, kill or reconfigure it; those that need to start their own."""
    from runners.engine import Engine, EngineSpec

    spec = EngineSpec(model=str(tiny_model_dir), args=TEST_ENGINE_ARGS,
                      log_path=tmp_path_factory.mktemp("shared-engine") / "server.log", startup_timeout_s=240)
    with Engine(spec) as engine:
        yield engine


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete():
    """A transactional test ends with a flush of every table. On PostgreSQL Django flushes with one
    TRUNCATE of all 50 tables: 0.2-0.5 s each time, on the server (new files for every table and
    index), against 0.01 s for a DELETE of each (the few rows a test leaves); SQLite flushes with
    DELETE already. Foreign keys are deferred to the flush's commit, so any order works but one:
    deleting runs fires the run-count triggers, so metrics_runcount is emptied after bench_run."""
    from django.db.backends.postgresql.base import DatabaseOperations as Postgres
    from django.db.backends.sqlite3.base import DatabaseOperations as SQLite

    def counts_last(tables):
        return sorted(tables, key=lambda table: table == RunCount._meta.db_table)

    def deleting(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences:
            return truncating(self, style, tables, reset_sequences=True, allow_cascade=allow_cascade)
        return [f"DELETE FROM {self.quote_name(table)};" for table in counts_last(tables)]

    def ordered(self, style, tables, **options):
        return sqlite_flush(self, style, counts_last(tables), **options)

    from benchsite.metrics.models import RunCount

    truncating, sqlite_flush = Postgres.sql_flush, SQLite.sql_flush
    Postgres.sql_flush, SQLite.sql_flush = deleting, ordered
    yield
    Postgres.sql_flush, SQLite.sql_flush = truncating, sqlite_flush


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hasher():
    """PBKDF2 at full strength costs about a second per user on a 2-core machine, and the role
    tests create four users each: every test in every directory hashes with MD5 instead."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Rate-limit counters (Django's cache) start at zero in every test: one test's requests
    must not make another's answer a 429."""
    from django.core.cache import cache

    cache.clear()
