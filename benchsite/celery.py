"""The Celery app: configured from Django settings (CELERY_* names), explicit queues.

Queues: `web` for everything that touches the database, `gpu.<pool>` for engine runs. A GPU
worker is started with the pools it serves (`-Q gpu.h200x2`) and needs only the broker URL.
"""
import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

from runners.contract import EXECUTE_RUN

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
# filesystem:// (the embedded broker) writes each message whole before a consumer can take it;
# other brokers (redis://) are untouched.
TRANSPORT_ALIASES["filesystem"] = "benchsite.fsbroker:Transport"

app = Celery("benchsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_default_queue="web",
    task_acks_late=True,
    task_reject_on_worker_lost=False,  # a run lost with its worker is failed by the reaper, not replayed
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=24 * 3600,
    broker_connection_retry_on_startup=True,
    task_routes={EXECUTE_RUN: {"queue": "gpu.default"}},  # overridden per benchmark pool
)
app.autodiscover_tasks(["benchsite.bench.lifecycle"])  # tasks.py: the web side
app.autodiscover_tasks(["benchsite.bench.worker"], related_name="gpu_tasks")


@app.on_after_finalize.connect
def _schedule_reaper(sender, **kwargs):
    from django.conf import settings

    sender.add_periodic_task(
        settings.BENCH_REAPER_INTERVAL_S, sender.signature("bench.reap_stale_runs", queue="web"), name="reap stale runs"
    )
    sender.add_periodic_task(  # queued runs whose message a restarted broker lost
        settings.BENCH_REAPER_INTERVAL_S, sender.signature("bench.requeue_lost_runs", queue="web"),
        name="requeue lost runs"
    )
