"""Alert deliveries counted from their saves: regressions/alerts.py records each attempt on the
Alert row, so its post_save says how the attempt went without the regressions app knowing of
metrics."""
from django.db.models.signals import post_save

from .instruments import ALERTS


def _alert_saved(sender, instance, created, update_fields=None, **kwargs):
    if created or not update_fields:
        return  # a new alert, or a save that says nothing of a delivery
    if "attempts" in update_fields:  # an attempt: sent, failed for good, or to be retried
        ALERTS.labels(result="retry" if "state" not in update_fields else instance.state).inc()
    elif "state" in update_fields and instance.state == "failed":  # given up after its retries
        ALERTS.labels(result="failed").inc()


def connect() -> None:
    post_save.connect(_alert_saved, sender="regressions.Alert", dispatch_uid="metrics-alert-saved")
