"""The text a scrape gets: every process's counters and histograms, then the database's gauges."""
from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest, multiprocess

from .collector import DatabaseCollector
from .instruments import ALL

# The classic text format: every Prometheus 2.x reads it (our names need none of 1.0.0's escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def metrics_text() -> bytes:
    registry = CollectorRegistry()
    if settings.PROMETHEUS_MULTIPROC_DIR:
        multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)  # the files of gunicorn's and Celery's processes
    else:
        for instrument in ALL:  # one process (runserver, tests): its own values
            registry.register(instrument)
    registry.register(DatabaseCollector())
    return generate_latest(registry)
