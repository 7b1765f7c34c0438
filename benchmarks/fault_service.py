"""The service under faults, as benchmarks/faults.py and benchmarks/soak.py start it: Django on a
database of the benchmark's own, a private Redis, the real Celery workers (web with beat, GPU)
with the fault clocks and the fake engine, optionally behind a TCP proxy that can cut the
database. Nothing shared is touched."""
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


def setup_django(database_url: str) -> None:
    """Point this process at DATABASE_URL and migrate it."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


@dataclass
class RunningService:
    redis: object  # tests.faults.harness.PrivateRedis
    workers: object  # tests.faults.harness.FaultWorkers
    db_proxy: object  # a TcpProxy in front of PostgreSQL, or None
    database_url: str  # what the workers use (through the proxy when there is one)


@contextlib.contextmanager
def running_service(work: Path, database_url: str, extra_env: dict | None = None, proxied: bool = False,
                    visibility_timeout_s: int = 3600):
    """Start a private Redis and the workers (web with beat, GPU) against DATABASE_URL, this
    process's Celery app pointed at that Redis; stop everything after."""
    from tests.faults.harness import FaultWorkers, PrivateRedis, point_app_at, proxied_database_url, restore_app

    redis = PrivateRedis(work)
    redis.start()
    proxy = None
    env = {"BENCH_VISIBILITY_TIMEOUT_S": str(visibility_timeout_s), **(extra_env or {})}
    try:
        if proxied:
            proxy, database_url = proxied_database_url(database_url)
        workers = FaultWorkers(redis.url, database_url, work, extra_env=env)
        saved = point_app_at(redis.url, visibility_timeout_s)
        try:
            workers.start_service()
            yield RunningService(redis=redis, workers=workers, db_proxy=proxy, database_url=database_url)
        finally:
            workers.stop()
            restore_app(saved)
    finally:
        if proxy is not None:
            proxy.stop()
        redis.kill()
