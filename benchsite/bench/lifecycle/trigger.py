"""Triggering runs: one QUEUED run per variant (sent once committed, or held behind its pool's
pushes), the patches uploaded with a trigger, and the variants a benchmark runs."""
import uuid
from functools import partial

from django.db import transaction

from runners.contract import SpecError, check_ref, patch_sha256
from runners.workloads import check_workloads

from ..models import Benchmark, EngineSource, Patch, Run, Variant
from . import dispatch, jobspec
from .signals import outcome_changed


class TriggerError(Exception):
    """A run cannot be triggered as asked (the message says why)."""


def patch_create(*, name: str, content: str) -> Patch:
    """A patch uploaded with a trigger; the same content is stored once."""
    existing = Patch.objects.filter(sha256=patch_sha256(content), name=name).first()
    return existing or Patch.objects.create(name=name, content=content)


def _held_phase(priority: int, pool: str) -> str:
    if priority == Run.Priority.FIRST:
        return ""
    first = "pushes" if priority == Run.Priority.CONFIRM else "pushes and confirmations"
    return f"held: {first} of pool {pool} go first"


def runs_trigger(*, benchmark: Benchmark, trigger: str, user=None, variants=None, commit: str = "", ref: str = "",
                 patches=(), queue: str = "", repeats: int | None = None,
                 priority: int = Run.Priority.FIRST, branch: str = "", merge_base_with: str = "",
                 like: Run | None = None) -> list[Run]:
    """Create one QUEUED run per variant (the whole ladder by default), enqueued once committed
    (to `queue` when given: one host of the pool, see dispatch.enqueue_run).

    `ref` is what was asked for (branch, tag or commit; the worker resolves it), `commit` a full
    SHA when the caller knows it (a push); `patches` (Patch rows) go on top of the variant's;
    `repeats` overrides the benchmark's timed repeats for these runs (None: the benchmark's).
    A `priority` below FIRST (a confirmation, bisection or canary) holds the runs until the pool
    has nothing above them (dispatch.runs_release). `branch` is the branch they belong to when the caller
    knows it (a push), else the worker tells. `merge_base_with` (a branch): the runs measure the
    merge base of `ref` and that branch, which the worker resolves. `like` (a run of the same
    variant, with a kept spec): the runs take its settings, not the benchmark's as they are now
    (contract.template_like: a confirmation or a bisection step measures what its series did)."""
    chosen = list(variants) if variants is not None else list(benchmark.variants.all())
    _check_trigger(benchmark, chosen, ref=ref, commit=commit, merge_base_with=merge_base_with, repeats=repeats)
    patches = list(patches)
    batch = uuid.uuid4()
    with transaction.atomic():
        # What the runs are sent, frozen now: a benchmark re-applied before they are sent (a held
        # run waits for hours) or sent again changes nothing of it (jobspec.py).
        kept = _kept_specs(benchmark, chosen, ref=ref or commit, commit=commit, merge_base_with=merge_base_with,
                           repeats=repeats, patches=patches, like=like)
        runs = [
            Run.objects.create(
                kept_spec=kept[variant.id],
                benchmark=benchmark,
                variant=variant,
                batch=batch,
                trigger=trigger,
                triggered_by=user if user is not None and user.is_authenticated else None,
                commit=commit,
                ref=ref or commit,
                merge_base_with=merge_base_with,
                branch=branch[:250],
                repeats=repeats,
                priority=priority,
                host_queue=queue,
                phase=_held_phase(priority, benchmark.gpu_pool),
            )
            for variant in sorted(chosen, key=lambda v: v.position)
        ]
        for run in runs:
            run.patches.set(patches)
            if priority == Run.Priority.FIRST:
                transaction.on_commit(partial(dispatch.enqueue_run, run.id, queue))
            transaction.on_commit(partial(outcome_changed.send, sender=Run, run_id=run.id))  # pending
        if priority != Run.Priority.FIRST:
            transaction.on_commit(partial(dispatch.runs_release, pool=benchmark.gpu_pool))
    return runs


def _check_trigger(benchmark: Benchmark, chosen: list, *, ref: str, commit: str, merge_base_with: str,
                   repeats: int | None) -> None:
    """TriggerError unless the variants, ref, commit, merge base and repeats make sense."""
    if not chosen:
        raise TriggerError(f"benchmark {benchmark.name!r} has no variants to run")
    foreign = [v.name for v in chosen if v.benchmark_id != benchmark.id]
    if foreign:
        raise TriggerError(f"variants {foreign} do not belong to {benchmark.name!r}")
    source = benchmark.engine_source
    if (ref or commit) and (source is None or source.kind != EngineSource.Kind.GIT):
        raise TriggerError(f"benchmark {benchmark.name!r} runs the installed engine: it has no repository "
                           "to take a ref or commit from")
    try:
        for given in filter(None, (ref, commit, merge_base_with)):
            check_ref(given)
        check_workloads(benchmark.workloads, max_tokens=benchmark.max_tokens, engine_args=benchmark.engine_args)
    except SpecError as exc:
        raise TriggerError(str(exc)) from None
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int)
                                or not 1 <= repeats <= Run.MAX_REPEATS):
        raise TriggerError(f"repeats={repeats!r}: give a whole number from 1 to {Run.MAX_REPEATS}")


def _kept_specs(benchmark: Benchmark, variants: list, *, ref: str, commit: str, merge_base_with: str,
                repeats: int | None, patches: list, like: Run | None = None) -> dict:
    """{variant id: its KeptSpec row}, LIKE's settings for LIKE's variant; TriggerError when the
    settings and the uploaded PATCHES make no valid job (each run's whole job is validated here,
    once: contract.spec_template and template_like)."""
    run = {"ref": ref, "commit": commit, "merge_base_with": merge_base_with, "repeats": repeats, "patches": patches}
    try:
        benchmark_patches = jobspec.benchmark_patch_specs(benchmark)
        templates = {variant.id: jobspec.spec_template(benchmark, variant, benchmark_patches=benchmark_patches, **run)
                     if like is None or like.kept_spec_id is None or like.variant_id != variant.id else
                     jobspec.template_like(like.kept_spec, benchmark, **run)
                     for variant in variants}
    except SpecError as exc:
        raise TriggerError(f"benchmark {benchmark.name!r}: {exc}") from None
    return {variant_id: jobspec.spec_keep(template) for variant_id, template in templates.items()}


def variant_create(*, benchmark: Benchmark, name: str, flags=(), env=None, is_reference=False) -> Variant:
    position = (benchmark.variants.order_by("-position").values_list("position", flat=True).first() or 0) + 1
    return Variant.objects.create(
        benchmark=benchmark, position=position, name=name, flags=list(flags), env=dict(env or {}), is_reference=is_reference
    )
