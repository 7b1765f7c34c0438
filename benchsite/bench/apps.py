from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class BenchConfig(AppConfig):
    name = "benchsite.bench"
    label = "bench"
    verbose_name = "Decode benchmarks"

    def __init__(self, app_name, app_module):
        super().__init__(app_name, app_module)
        # Probe plug-ins, on both sides: the worker runs them, the web side knows their metrics.
        # Loaded before any app's models are imported (Django makes every app's config first),
        # since the metrics the probes declare are checked by name at import (regressions' floors);
        # a module that cannot be imported stops the start here, with its name.
        from runners.probes.registry import load_probe_modules

        load_probe_modules(settings.BENCH_PROBE_MODULES)

    def ready(self):
        # Folders are made when the app starts (web, worker or command), never at settings import.
        for path in runtime_dirs():
            path.mkdir(parents=True, exist_ok=True)
        # Writes that change a chart keep its rolled-up series current.
        from .domain import rollup_triggers

        rollup_triggers.connect()
        # ... and the home page's cached summaries keyed on their benchmark's version.
        from .domain import home_cache

        home_cache.connect()


def runtime_dirs() -> list[Path]:
    """VAR_DIR (SQLite test databases live there), STATIC_ROOT (whitenoise warns when it is missing)
    and the filesystem broker's folders when that broker is used."""
    dirs = [Path(settings.VAR_DIR), Path(settings.STATIC_ROOT)]
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    dirs += [Path(options[k]) for k in ("data_folder_in", "processed_folder", "control_folder") if k in options]
    backend = settings.CELERY_RESULT_BACKEND
    if backend.startswith("file://"):
        dirs.append(Path(backend.removeprefix("file://")))
    return dirs
