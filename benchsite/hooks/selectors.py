"""Reads for the JSON API and the commit status."""
from django.db.models import OuterRef, QuerySet, Subquery
from django.urls import reverse

from benchsite.bench.models import Measurement, Run
from runners import contract

from .api import RunFilters


def _with_decode(runs: QuerySet[Run]) -> QuerySet[Run]:
    decode = Measurement.objects.filter(run=OuterRef("pk"), metric=contract.DECODE_TOK_S)
    return runs.annotate(decode_tok_s=Subquery(decode.values("value")[:1]))


def runs_filter(*, filters: RunFilters) -> list[Run]:
    runs = Run.objects.select_related("benchmark", "variant").order_by("-created_at", "-id")
    if filters.commit:
        runs = runs.filter(commit__startswith=filters.commit)
    if filters.benchmark is not None:
        runs = runs.filter(benchmark=filters.benchmark)
    if filters.states:
        runs = runs.filter(state__in=filters.states)
    if filters.ref:
        runs = runs.filter(ref=filters.ref)
    return list(_with_decode(runs)[: filters.limit])


def run_json(run: Run, *, base_url: str) -> dict:
    """One run for API clients. `base_url` makes `url` absolute (scheme://host)."""
    def when(dt):
        return dt.isoformat() if dt else None

    decode = getattr(run, "decode_tok_s", None)
    if decode is None and not hasattr(run, "decode_tok_s"):
        decode = run.measurements.filter(metric=contract.DECODE_TOK_S).values_list("value", flat=True).first()
    return {
        "id": run.id,
        "benchmark": run.benchmark.slug,
        "variant": run.variant.name,
        "commit": run.commit,
        "ref": run.ref,
        "state": run.state,
        "trigger": run.trigger,
        "created_at": when(run.created_at),
        "started_at": when(run.started_at),
        "finished_at": when(run.finished_at),
        "url": base_url.rstrip("/") + reverse("bench:run", args=[run.id]),
        "decode_tok_s": decode,
        "error": run.error,
    }
