"""Web-queue task of the regressions app: thin; the logic is in `alerts`. Stable name."""
import logging

from celery import shared_task
from django.conf import settings

from runners.contract import RECORD_HOST_HEALTH

from benchsite.bench.lifecycle.tasks import DB_RETRY
from benchsite.retry import retry_or_give_up

log = logging.getLogger(__name__)


@shared_task(name="regressions.deliver_alert", bind=True, acks_late=True, max_retries=None)
def deliver_alert(self, alert_id: int) -> bool:
    from . import alerts

    try:
        return alerts.alert_deliver(alert_id=alert_id)
    except alerts.TransientAlertError as exc:
        error = str(exc)
        # 30 s, 60 s, 120 s... by default
        return retry_or_give_up(self, exc, what=f"alert {alert_id}", policy=settings.BENCH_ALERT_RETRY,
                                give_up=lambda: alerts.alert_give_up(alert_id=alert_id, error=error))


@shared_task(name="regressions.trigger_canaries")
def trigger_canaries() -> int:
    from .canary import canaries_trigger_due

    return len(canaries_trigger_due())


@shared_task(name=RECORD_HOST_HEALTH)
def record_host_health(doc: dict) -> bool:
    """A GPU worker's comm health check before a batch (runners/probes/health.py)."""
    from .hosthealth import HealthMessageError, host_health_record

    try:
        host_health_record(doc=doc)
    except HealthMessageError as exc:
        log.warning("dropped a bad health check message: %s", exc)
        return False
    return True


@shared_task(name="regressions.judge_run", **DB_RETRY)
def judge_run(run_id: int) -> bool:
    """A finished run's judgement, deferred while the database was busy or away (judgement.py)."""
    from .judgement import run_judge_recorded

    return run_judge_recorded(run_id=run_id)
