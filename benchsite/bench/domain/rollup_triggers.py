"""The writes that change a chart mark its benchmark's rolled-up series stale and rebuild them once
committed (bench.domain.rollups). Connected in BenchConfig.ready. Bulk writes send no signals:
`manage.py bench_rollup` finds those by the raw data's version."""
from __future__ import annotations

from functools import partial

from django.db import transaction

from . import rollups, write_watch

# A run's fields the charts read (history._rows); saves of other fields (progress, heartbeats) change no chart.
CHART_RUN_FIELDS = frozenset({"state", "trigger", "commit", "branch", "ref", "build", "variant", "batch", "created_at"})


def note_change(benchmark_id: int | None) -> None:
    if benchmark_id is None:
        return
    rollups.mark_stale(benchmark_id)
    transaction.on_commit(partial(rollups.refresh_after_write, benchmark_id))


def connect() -> None:
    write_watch.connect_watch(note_change, name="rollup", run_fields=CHART_RUN_FIELDS)
