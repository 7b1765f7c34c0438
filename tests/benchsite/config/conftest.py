import os
from pathlib import Path

import pytest

PREFIXES = ("BENCH_", "DJANGO_", "CELERY_", "DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR")
BASE = Path("/srv/bench")  # a checkout's root: the default data folder is under it


@pytest.fixture
def environ(monkeypatch):
    """A clean environment: only the variables the test sets (monkeypatch.setenv)."""
    for name in [n for n in os.environ if n.startswith(PREFIXES)]:
        monkeypatch.delenv(name)
    return monkeypatch
