"""The service under faults: a private Redis, real workers with beat, the fake-engine benchmark."""
import pytest

from tests.conftest import _database_url

from .harness import (FaultWorkers, FullDisk, PrivateRedis, fault_benchmark, point_app_at, proxied_database_url,
                      restore_app)
from .scenarios import DATABASE_DOWN_ENV, Service


def _service(tmp_path, transactional_db, extra_env=None, visibility_timeout_s=3600, db_proxy=False):
    from django.db import connection

    redis = PrivateRedis(tmp_path)
    redis.start()
    env = {"BENCH_VISIBILITY_TIMEOUT_S": str(visibility_timeout_s), **(extra_env or {})}
    database_url, proxy = _database_url(connection.settings_dict), None
    if db_proxy:
        proxy, database_url = proxied_database_url(database_url)
    workers = FaultWorkers(redis.url, database_url, tmp_path, extra_env=env)
    saved = point_app_at(redis.url, visibility_timeout_s)
    gate = tmp_path / "gate"
    return Service(redis=redis, workers=workers, benchmark=fault_benchmark(gate), gate=gate, db_proxy=proxy), saved


@pytest.fixture
def service(tmp_path, transactional_db):
    svc, saved = _service(tmp_path, transactional_db)
    svc.workers.start_service()
    yield svc
    svc.workers.stop()
    restore_app(saved)
    svc.redis.kill()


@pytest.fixture
def short_visibility_service(tmp_path, transactional_db):
    """Redis makes an unacknowledged message visible again after 3 s (production: 6 h)."""
    svc, saved = _service(tmp_path, transactional_db, visibility_timeout_s=3)
    svc.workers.start_service()
    yield svc
    svc.workers.stop()
    restore_app(saved)
    svc.redis.kill()


@pytest.fixture
def proxied_db_service(tmp_path, transactional_db):
    """The workers reach PostgreSQL through a TcpProxy that the test can cut."""
    svc, saved = _service(tmp_path, transactional_db, extra_env=DATABASE_DOWN_ENV, db_proxy=True)
    svc.workers.start_service()
    yield svc
    svc.workers.stop()
    svc.db_proxy.stop()
    restore_app(saved)
    svc.redis.kill()


@pytest.fixture
def full_disk_service(tmp_path, transactional_db):
    """The workers' artifact storage is a full 1 MiB tmpfs (a real ENOSPC)."""
    with FullDisk(tmp_path / "artifacts-disk") as disk:
        svc, saved = _service(tmp_path, transactional_db, extra_env={"BENCH_ARTIFACTS_DIR": str(disk.path)})
        svc.workers.start_service()
        try:
            yield svc, disk
        finally:
            svc.workers.stop()
            restore_app(saved)
            svc.redis.kill()
