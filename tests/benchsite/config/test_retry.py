"""One retry policy per integration, filled from the variables deployments already set, and the
one rule the web-queue tasks retry by (benchsite/retry.py)."""
import logging
from types import SimpleNamespace

import pytest

from benchsite.config import RetryPolicy, load
from benchsite.config.alerts import Alerts
from benchsite.config.database import Database
from benchsite.config.load import read_group
from benchsite.config.statuses import Statuses
from benchsite.retry import retry_or_give_up

from .conftest import BASE


def test_the_wait_doubles_up_to_the_cap():
    assert [RetryPolicy(retries=5, base_s=30).delay_s(n) for n in range(4)] == [30, 60, 120, 240]
    assert [RetryPolicy(retries=500, base_s=1, cap_s=5).delay_s(n) for n in range(5)] == [1, 2, 4, 5, 5]


def test_defaults(environ):
    config = load(BASE)
    assert config.alerts.retry == config.statuses.retry == RetryPolicy(retries=5, base_s=30)
    assert config.database.retry == RetryPolicy(retries=500, base_s=1, cap_s=30)


@pytest.mark.parametrize("group, retries, base, cap, expected", [
    (Alerts, "BENCH_ALERT_MAX_RETRIES", "BENCH_ALERT_RETRY_BASE_MS", None, RetryPolicy(retries=2, base_s=0.25)),
    (Statuses, "BENCH_STATUS_MAX_RETRIES", "BENCH_STATUS_RETRY_BASE_MS", None, RetryPolicy(retries=2, base_s=0.25)),
    (Database, None, None, "BENCH_DB_RETRY_BACKOFF_MAX_S", RetryPolicy(retries=500, base_s=1, cap_s=7)),
])
def test_each_policy_reads_the_variables_deployments_set(environ, group, retries, base, cap, expected):
    for name, value in ((retries, "2"), (base, "250"), (cap, "7")):
        if name:
            environ.setenv(name, value)
    assert read_group(group).retry == expected


def test_a_task_retries_by_its_policy_then_gives_up(caplog):
    class Retry(Exception):
        pass

    task = SimpleNamespace(request=SimpleNamespace(retries=2), retry=lambda countdown: Retry(countdown))
    policy = RetryPolicy(retries=3, base_s=0.5)
    with pytest.raises(Retry) as raised:
        retry_or_give_up(task, OSError("refused"), what="alert 7", policy=policy)
    assert raised.value.args == (2.0,)  # 0.5 s, 1 s, then 2 s before the third retry
    given_up = []
    task.request.retries = 3
    with caplog.at_level(logging.ERROR):
        assert retry_or_give_up(task, OSError("refused"), what="alert 7", policy=policy,
                                give_up=lambda: given_up.append(True)) is False
    assert given_up == [True] and "alert 7: gave up after 4 attempts: refused" in caplog.text
