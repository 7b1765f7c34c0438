"""The home page's per-benchmark summaries kept in Django's cache (settings.CACHES: per process, or
Redis with BENCH_CACHE_URL), so that a request recomputes only the benchmarks whose data changed.

- Each benchmark's entry is keyed by its HomeVersion, read for every benchmark in the query that
  lists them (one query however many there are), and holds the main line it was computed for: a
  changed engine source (its default ref) or benchmark (its engine) misses by itself.
- Every write that changes what the page shows of a benchmark gives its HomeVersion a new random
  value (note_change), in the write's own transaction, after the write:
  - signals (connect(), from BenchConfig.ready): a run saved into or out of SUCCEEDED, or a
    succeeded run's line, commit, batch, variant, date or outcome saved; a run deleted; a decode
    or correctness measurement saved (a result stored, its correctness re-judged); a variant
    saved or deleted;
  - writes with QuerySet.update, which send no signal: outcomes re-judged
    (regressions/outcomes.outcomes_refresh), a run cancelled (lifecycle/cancel), variants
    renumbered (definitions/apply); measurements deleted in the admin (bench/admin.py);
  - bulk writes that send no signal (bulk_create, COPY, a restore): `manage.py bench_rollup`
    (with or without --rebuild) gives every benchmark a new version, and entries expire after
    CACHE_TTL_S in any case.
- The version is read before the data: an entry never holds data older than its version.
The queued and running runs are read on every request (they change all the time)."""
from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable

from django.core.cache import cache
from django.db.models import F
from django.db.models.signals import post_delete

from runners.contract import CORRECT, DECODE_TOK_S

from . import write_watch
from .branches import main_line
from ..models import Benchmark, HomeVersion

log = logging.getLogger(__name__)

KEY_PREFIX = "bench:home:2"  # a new number when an entry's layout or the summaries' rules change
# A bound on how long a write no signal reports (a bulk import without bench_rollup) stays unseen.
CACHE_TTL_S = 3600
# A run's fields the summaries read (home._recent_decode_rows), besides its measurements.
HOME_RUN_FIELDS = frozenset({"state", "trigger", "commit", "branch", "variant", "batch", "created_at",
                             "outcome", "outcome_final"})
HOME_METRICS = frozenset({DECODE_TOK_S, CORRECT})


def _new_version() -> int:
    return secrets.randbits(63)


def note_change(benchmark_id: int | None) -> None:
    """Give BENCHMARK_ID's summaries a new version (one UPDATE; an INSERT the first time)."""
    if benchmark_id is None:
        return
    version = _new_version()
    if not HomeVersion.objects.filter(benchmark_id=benchmark_id).update(version=version):
        HomeVersion.objects.bulk_create([HomeVersion(benchmark_id=benchmark_id, version=version)],
                                        ignore_conflicts=True)  # a concurrent first write made it: as new


def note_changes(benchmark_ids: Iterable[int]) -> int:
    """A new version for each of BENCHMARK_IDS: after writes that send no signals. Returns how many."""
    ids = sorted(set(benchmark_ids))
    for benchmark_id in ids:
        note_change(benchmark_id)
    return len(ids)


def with_versions(benchmarks):
    """BENCHMARKS (a queryset) with each one's engine source and summaries' version (`summary_version`,
    None before its first write) read in the same query."""
    return benchmarks.select_related("engine_source").annotate(summary_version=F("home_version__version"))


def _key(benchmark: Benchmark) -> str:
    return f"{KEY_PREFIX}:{benchmark.pk}:{benchmark.summary_version}"


def summaries(benchmarks: list[Benchmark], compute: Callable[[list[Benchmark]], dict[int, list[dict]]],
              ) -> dict[int, list[dict]]:
    """Per benchmark id, its variants' summaries: from the cache where its entry is current, else
    from COMPUTE (called once, with the benchmarks that missed), which are stored then. BENCHMARKS
    come from with_versions()."""
    keys = {b.pk: _key(b) for b in benchmarks}
    lines = {b.pk: main_line(b) for b in benchmarks}
    try:
        found = cache.get_many(list(keys.values())) if keys else {}
    except Exception:  # noqa: BLE001 - a cache away (Redis down) costs the computation, not the page
        log.warning("home page cache unreadable: every benchmark computed", exc_info=True)
        found = {}
    out, missing = {}, []
    for b in benchmarks:
        entry = found.get(keys[b.pk])
        if entry is not None and entry["line"] == lines[b.pk]:
            out[b.pk] = entry["variants"]
        else:
            missing.append(b)
    if missing:
        fresh = compute(missing)
        try:
            cache.set_many({keys[b.pk]: {"line": lines[b.pk], "variants": fresh[b.pk]} for b in missing}, CACHE_TTL_S)
        except Exception:  # noqa: BLE001
            log.warning("home page cache unwritable", exc_info=True)
        out.update(fresh)
    return out


# --- the writes that signal ------------------------------------------------------------------


def _benchmark_deleted(sender, instance: Benchmark, **kwargs) -> None:
    HomeVersion.objects.filter(benchmark_id=instance.pk).delete()  # its runs' deletions may have written it


def connect() -> None:
    write_watch.connect_watch(note_change, name="home", run_fields=HOME_RUN_FIELDS, metrics=HOME_METRICS)
    post_delete.connect(_benchmark_deleted, sender=Benchmark, dispatch_uid="home_benchmark_deleted")
