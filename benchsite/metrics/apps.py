from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "benchsite.metrics"
    label = "metrics"
    verbose_name = "Prometheus metrics"

    def ready(self):
        from . import receivers

        receivers.connect()
