"""Importing an offline GPU host's runs (a `runners ladder` result file) as one batch."""
import uuid
from datetime import datetime
from datetime import timezone as dt_timezone

from django.db import transaction
from django.utils import timezone

from runners.analysis.share import with_headline_ceiling
from runners.contract import JobResult, LadderFile, Measurement

from ..models import Benchmark, Run
from .complete import run_complete
from .fail import run_fail
from .trigger import variant_create


def runs_import(*, data: dict, gpu_pool: str = "imported") -> list[Run]:
    """Load a `runners ladder` result file (an offline GPU host's runs) as one batch. Each run
    keeps the times it was measured (created, started, finished, from the file), the host it ran
    on (its result's: contract.LadderFile gives an older file's results the file's) and one
    headline ceiling (runners.analysis.share.with_headline_ceiling: an older file's may follow
    another share)."""
    ladder = LadderFile.from_dict(data)
    spec = ladder.benchmark
    batch = uuid.uuid4()
    with transaction.atomic():
        benchmark, _ = Benchmark.objects.get_or_create(
            slug=spec["slug"],
            defaults={
                "name": spec.get("name", spec["slug"]),
                "description": spec.get("description", ""),
                "model": spec["model"],
                "tensor_parallel_size": spec.get("tensor_parallel_size", 1),
                "gpu_pool": gpu_pool,
                "prompt": spec.get("prompt", ""),
                "max_tokens": spec.get("max_tokens", 128),
                "repeats": spec.get("repeats", 5),
                "warmup": spec.get("warmup", 1),
                "engine_args": spec.get("engine_args", []),
                "engine_env": spec.get("engine_env", {}),
            },
        )
        runs = [_import_entry(benchmark, entry, batch=batch, host=ladder.host) for entry in ladder.runs]
        _import_builds_on(benchmark, [*ladder.variants, *(entry["variant"] for entry in ladder.runs)])
    return runs


def _import_entry(benchmark: Benchmark, entry: dict, *, batch, host: dict) -> Run:
    """One run of a ladder file, stored as measured."""
    v = entry["variant"]
    variant = benchmark.variants.filter(name=v["name"]).first() or variant_create(
        benchmark=benchmark, name=v["name"], flags=v.get("flags", []), env=v.get("env", {}),
        is_reference=v.get("is_reference", False),
    )
    started = _from_epoch(entry.get("started_at"))
    finished = _from_epoch(entry.get("finished_at")) or timezone.now()
    created = _from_epoch(entry.get("created_at")) or started or finished
    run = Run.objects.create(
        benchmark=benchmark, variant=variant, batch=batch, trigger=Run.Trigger.IMPORT, state=Run.State.RUNNING,
        worker_host=host.get("hostname", ""), phase="imported", started_at=started, heartbeat_at=finished,
    )
    Run.objects.filter(id=run.id).update(created_at=created)  # auto_now_add: the measured time instead
    run.created_at = created
    if entry["state"] == "SUCCEEDED":
        result = JobResult.from_dict(entry["result"])
        result.measurements = [Measurement.from_dict(m) for m in
                               with_headline_ceiling([m.to_dict() for m in result.measurements])]
        run_complete(run_id=run.id, result=result)
    else:
        run_fail(run_id=run.id, error=entry.get("error", "failed"), artifacts=entry.get("artifacts", []))
    Run.objects.filter(id=run.id).update(finished_at=finished, heartbeat_at=finished)
    return run


def _import_builds_on(benchmark: Benchmark, specs: list[dict]) -> None:
    """A ladder file's `builds_on` (another variant's name): the step each variant builds on in
    the waterfall. A name that is not a variant of the benchmark fails the whole import."""
    by_name = {v.name: v for v in benchmark.variants.all()}
    for spec in specs:
        base, variant = spec.get("builds_on"), by_name.get(spec.get("name"))
        if not base or variant is None:
            continue
        if base not in by_name or base == variant.name:
            raise ValueError(f"variant {variant.name!r} builds_on {base!r}: not another variant of {benchmark.slug} "
                             f"(variants: {sorted(by_name)})")
        if variant.builds_on_id != by_name[base].pk:
            variant.builds_on = by_name[base]
            variant.save(update_fields=["builds_on"])


def _from_epoch(seconds):
    return datetime.fromtimestamp(seconds, tz=dt_timezone.utc) if seconds else None
