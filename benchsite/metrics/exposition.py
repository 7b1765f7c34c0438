"""The text a scrape gets: every process's counters and histograms, then the database's gauges."""
import os

from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .collector import DatabaseCollector
from .instruments import ALL

CONTENT_TYPE = CONTENT_TYPE_LATEST


def multiprocess_dir() -> str:
    """prometheus_client's own variable: it picks its value class from it when first imported."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def metrics_text() -> bytes:
    registry = CollectorRegistry()
    if multiprocess_dir():
        multiprocess.MultiProcessCollector(registry)  # the files of gunicorn's and Celery's processes
    else:
        for instrument in ALL:  # one process (runserver, tests): its own values
            registry.register(instrument)
    registry.register(DatabaseCollector())
    return generate_latest(registry)
