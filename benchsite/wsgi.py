"""The web process (gunicorn benchsite.wsgi)."""
import gc
import os

from django.core.wsgi import get_wsgi_application
from django.db.backends.signals import connection_created
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
application = get_wsgi_application()


def _serial_plans(sender, connection, **kwargs):
    """A page's queries read a few thousand rows by index: a parallel worker's start (10-20 ms on
    a 2-core host) costs more than it saves, so web requests plan without them. The workers'
    whole-history reads (rollup rebuilds, judging) keep them."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET max_parallel_workers_per_gather = 0")


connection_created.connect(_serial_plans, dispatch_uid="web_serial_plans")

# The loaded app's objects live as long as the process: kept out of the collector's full passes,
# which otherwise walk all of them every few requests and add tens of ms to one response in twenty.
# The URLconf and the views it imports (Django REST framework's, drf-spectacular's: 30,000 objects)
# are loaded now rather than on the first request, so that they are frozen too.
get_resolver().url_patterns
gc.collect()
gc.freeze()
