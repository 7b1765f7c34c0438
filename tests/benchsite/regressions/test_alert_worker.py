"""The alert webhook delivered by the real web-queue Celery worker on Redis: a 500 first, then the
task's own retry after its backoff delivers the same signed body."""
import hashlib
import hmac
import json

import pytest

from benchsite.regressions.models import Alert, ChangePoint, Subscription
from benchsite.regressions.pipeline import run_judge
from tests.conftest import wait_for

from .conftest import add_run, sha
from .test_alerts import SECRET, WOBBLE, Receiver


@pytest.fixture
def worker_alert_env(monkeypatch):
    """Read by the worker processes (started after this fixture): signing key, short backoff."""
    monkeypatch.setenv("BENCH_ALERT_SECRET", SECRET)
    monkeypatch.setenv("BENCH_ALERT_RETRY_BASE_MS", "300")


def test_webhook_retried_by_the_web_worker(worker_alert_env, celery_workers, benchmark, settings):
    settings.BENCH_CONFIRM_REGRESSIONS = False  # this process decides: alert at once
    receiver = Receiver(statuses=[500])
    try:
        Subscription.objects.create(benchmark=benchmark, webhook_url=receiver.url)
        for i in range(10):
            run_judge(run_id=add_run(benchmark, 100 * (1 + WOBBLE[i % 5] / 100), commit=sha(i + 1)).id)
        run_judge(run_id=add_run(benchmark, 94.0, commit=sha(99)).id)  # queued to Redis on commit
        assert ChangePoint.objects.get().status == "confirmed"
        alert = wait_for(lambda: Alert.objects.filter(state="sent").first(), 60, 0.5, "the alert to be sent",
                         explain=celery_workers.tails)
        assert alert.attempts == 2 and len(receiver.requests) == 2
        (_, first), (headers, body) = receiver.requests
        assert first == body and json.loads(body)["commit"] == sha(99)
        assert headers["X-Bench-Signature"] == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert "retry 1" in celery_workers.log("web")
    finally:
        receiver.close()
