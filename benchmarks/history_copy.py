"""A year of per-commit history written with PostgreSQL's COPY (psycopg 3's cursor.copy), not
ORM saves: BENCHMARKS benchmarks x 5 variants x 8 metrics, one commit per batch every 36
minutes (40 a day), run ids in time order. A million runs and their 8,000,000 measurements
take minutes. Rows get every column the model has: the ones given here, the rest their
model default, so that the pages read them as they read rows the service wrote."""
from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

METRICS = ("decode_tok_s", "ttft_ms", "itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "allreduce_share",
           "allreduce_us_per_call", "correct")
BATCH_EVERY = timedelta(minutes=36)


def figures(tok_s: float, i: int) -> list[tuple[str, float, float | None, float | None]]:
    """(metric, value, ci_low, ci_high) of one run: the eight metrics the dashboard shows."""
    step = 1000 / tok_s
    return [("decode_tok_s", tok_s, tok_s * .99, tok_s * 1.01), ("ttft_ms", step * 3, None, None),
            ("itl_ms_p50", step, None, None), ("itl_ms_p90", step * 1.05, None, None),
            ("itl_ms_p99", step * 1.2, None, None), ("allreduce_share", 0.3, None, None),
            ("allreduce_us_per_call", 40.0, None, None), ("correct", 1.0 if i % 97 else 0.0, None, None)]


def _constants(model, given: tuple[str, ...]) -> tuple[list[str], tuple]:
    """The columns of MODEL not in GIVEN (its serial id aside) and the value each defaults to."""
    now = datetime.now(timezone.utc)
    columns, values = [], []
    for field in model._meta.concrete_fields:
        if field.attname in given or field.primary_key:
            continue
        value = now if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False) else field.get_default()
        if field.get_internal_type() == "JSONField":
            value = json.dumps(value)
        columns.append(field.column)
        values.append(value)
    return columns, tuple(values)


def _copy(cursor, model, given: tuple[str, ...], rows) -> int:
    """COPY ROWS (tuples in the order of GIVEN, attnames) into MODEL's table; returns the count."""
    rest, constants = _constants(model, given)
    column = {f.attname: f.column for f in model._meta.concrete_fields}
    columns = ", ".join(f'"{c}"' for c in [column[a] for a in given] + rest)
    count = 0
    with cursor.copy(f'COPY "{model._meta.db_table}" ({columns}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(row + constants)
            count += 1
    return count


def seed_copy(runs: int, benchmarks: int, base_tok_s: tuple[float, ...], variant_specs) -> dict:
    """Create BENCHMARKS benchmarks with the variants of VARIANT_SPECS ((name, flags, env), ...)
    and RUNS succeeded runs between them, newest last; returns the ids the pages need."""
    from django.db import connection

    from benchsite.bench.models import Benchmark, Measurement, Run, Variant
    from benchsite.bench.domain import home_cache

    made = [Benchmark.objects.create(name=f"Llama 8B TP2 H200 #{b}" if b else "Llama 8B TP2 H200",
                                     slug=f"load-{b}" if b else "load", model="/models/llama-8b",
                                     tensor_parallel_size=2, gpu_pool="h200x2") for b in range(benchmarks)]
    variants = [[Variant.objects.create(benchmark=bench, position=i + 1, name=n, flags=f, env=e, is_reference=i == 0)
                 for i, (n, f, e) in enumerate(variant_specs)] for bench in made]
    per_batch = benchmarks * len(variant_specs)
    batches = -(-runs // per_batch)
    start = datetime.now(timezone.utc) - BATCH_EVERY * (batches + 1)
    first_id = (Run.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1

    def run_rows():
        n = 0
        for b in range(batches):
            t = start + BATCH_EVERY * b
            commit = f"{b:08x}" + uuid.uuid4().hex
            for vs in variants:
                batch = uuid.uuid4()
                for v in vs:
                    if n == runs:
                        return
                    yield (first_id + n, v.benchmark_id, v.id, batch, "SUCCEEDED", commit, t, t, t + timedelta(minutes=5),
                           "gpu-1", "done")
                    n += 1

    def measurement_rows():
        position = {v.id: v.position for vs in variants for v in vs}
        order = [v.id for vs in variants for v in vs]
        for n in range(runs):
            tok_s = base_tok_s[position[order[n % per_batch]] - 1] * (1 + 0.02 * ((n * 7919) % 13 - 6) / 6)
            for metric, value, low, high in figures(tok_s, n):
                yield (first_id + n, metric, value, f"[{value}, {value}, {value}, {value}, {value}]", low, high)

    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # psycopg's own, for copy()
        _copy(cursor, Run, ("id", "benchmark_id", "variant_id", "batch", "state", "commit", "created_at", "started_at",
                            "finished_at", "worker_host", "phase"), run_rows())
        _copy(cursor, Measurement, ("run_id", "metric", "value", "samples", "ci_low", "ci_high"), measurement_rows())
        cursor.execute("SELECT setval(pg_get_serial_sequence('bench_run', 'id'), (SELECT max(id) FROM bench_run))")
        cursor.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load: statistics, visibility map
    home_cache.note_changes(b.pk for b in made)  # COPY sends no signal: the home page recomputes them
    return {"benchmarks": made, "variants": variants}
