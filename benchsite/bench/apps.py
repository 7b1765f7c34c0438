from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "benchsite.bench"
    label = "bench"
    verbose_name = "Decode benchmarks"
