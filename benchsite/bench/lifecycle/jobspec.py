"""The job spec a run is sent, frozen when the run is triggered: the database's side of it.

Every shape of the spec is made by the contract (runners/contract.py: spec_template,
template_like, spec_sent, spec_key, settings_digest); this module reads the benchmark, its
engine source, the variant, the run and their patches into the plain values those take, and
keeps the template in a KeptSpec row, one per distinct content (contract.spec_key), which the
run points at. In that row null stands for what the run holds itself and never changes
(contract.RunOwn: its id, its ref, the commit given at the trigger, the merge base branch); the
run's uploaded patches (Patch rows of its own) follow the kept ones. So a run sent again (the
reaper, a lost message, a held run's release) runs what was triggered, and its spec.json shows
what its worker was sent, whatever `bench_apply` or the admin changed since.

A run from before specs were kept has no row: `spec_rebuilt` builds its spec from the benchmark
and variant as they are now (its page says so), and the first send of such a run keeps it.
"""
from __future__ import annotations

from django.db import transaction

from runners import contract

from ..models import Benchmark, KeptSpec, Run, Variant


def _entries(patches, origin: str) -> list[dict]:
    """PATCHES (Patch rows, in the order given) as a spec's patch entries of ORIGIN."""
    return [contract.patch_entry(p.name, p.content, p.sha256, origin) for p in patches]


def _patch_entries(patches, origin: str) -> list[dict]:
    return _entries(patches.order_by("id"), origin)


def benchmark_patch_specs(benchmark: Benchmark) -> list[dict]:
    return _patch_entries(benchmark.patches, "benchmark")


def _source(benchmark: Benchmark) -> dict | None:
    """The benchmark's engine source as contract.job_engine takes it (None: the installed engine)."""
    source = benchmark.engine_source
    if source is None:
        return None
    return {"kind": source.kind, "repo": source.repo_url, "default_ref": source.default_ref}


def _run_own(run: Run) -> contract.RunOwn:
    """What RUN holds itself: its id, ref, commit, merge base and uploaded patches."""
    return contract.RunOwn(run_id=run.id, ref=run.ref, commit=run.commit, merge_base_with=run.merge_base_with,
                           patches=tuple(_patch_entries(run.patches, "run")))


def _trigger_own(*, ref: str, commit: str, merge_base_with: str, patches) -> contract.RunOwn:
    """What a run about to be triggered will hold itself; PATCHES: the Patch rows uploaded with it."""
    return contract.RunOwn(ref=ref, commit=commit, merge_base_with=merge_base_with,
                           patches=tuple(_entries(patches, "run")))


def _template(benchmark: Benchmark, variant: Variant, own: contract.RunOwn, *, repeats: int | None,
              benchmark_patches: list[dict] | None = None) -> dict:
    """contract.spec_template of the benchmark and variant as they are now, for a run holding OWN."""
    if benchmark_patches is None:
        benchmark_patches = benchmark_patch_specs(benchmark)
    given = {key: getattr(benchmark, key, None) for key in contract.BENCHMARK_FIELDS}
    return contract.spec_template(given, {key: getattr(variant, key) for key in contract.VARIANT_FIELDS},
                                  source=_source(benchmark), run=own, repeats=repeats,
                                  patches=[*benchmark_patches, *_patch_entries(variant.patches, "variant")])


def spec_rebuilt(run: Run) -> dict:
    """RUN's spec from its benchmark and variant as they are NOW: the benchmark's, the variant's,
    then the run's own patches. For a run without a kept spec only (it may differ from what ran)."""
    own = _run_own(run)
    return contract.spec_sent(_template(run.benchmark, run.variant, own, repeats=run.repeats), own)


def spec_template(benchmark: Benchmark, variant: Variant, *, repeats: int | None, ref: str, commit: str,
                  merge_base_with: str, benchmark_patches: list[dict] | None = None, patches=()) -> dict:
    """What a run of VARIANT triggered with these values (PATCHES: the Patch rows uploaded with it)
    is sent, less what the run holds itself (contract.spec_template). REF is the run's `ref` (what
    the trigger asked for, else its commit). SpecError when they make no valid job."""
    own = _trigger_own(ref=ref, commit=commit, merge_base_with=merge_base_with, patches=patches)
    return _template(benchmark, variant, own, repeats=repeats, benchmark_patches=benchmark_patches)


def spec_keep(template: dict) -> KeptSpec:
    """The row holding TEMPLATE, made the first time it is seen. Locked until the caller's
    transaction ends, so bench_gc cannot collect it before the run that points at it is stored."""
    with transaction.atomic():
        row, _ = KeptSpec.objects.select_for_update().get_or_create(
            sha256=contract.spec_key(template),
            defaults={"spec": template, "settings": contract.settings_digest(template)})
    return row


def template_like(kept: KeptSpec, benchmark: Benchmark, *, ref: str, commit: str, merge_base_with: str,
                  repeats: int | None, patches=()) -> dict:
    """KEPT's spec for a run of another commit (contract.template_like): a confirmation or a
    bisection step measures what its series measured, whatever `bench_apply` changed since."""
    default_ref = getattr(benchmark.engine_source, "default_ref", "") or ""
    own = _trigger_own(ref=ref, commit=commit, merge_base_with=merge_base_with, patches=patches)
    return contract.template_like(kept.spec, default_ref=default_ref, run=own, repeats=repeats)


def spec_sent(run: Run) -> dict | None:
    """The spec RUN was (or will be) sent: its kept part with the run's own values put back
    (contract.spec_sent); None for a run without a kept spec."""
    if run.kept_spec_id is None:
        return None
    return contract.spec_sent(run.kept_spec.spec, _run_own(run))


def run_spec(run: Run) -> dict:
    """The spec RUN is sent: its kept one, or for a run from before they were kept, the rebuilt one."""
    sent = spec_sent(run)
    return sent if sent is not None else spec_rebuilt(run)


def run_spec_keep(run: Run) -> None:
    """Keep the spec of a run that has none (queued before specs were kept), as it is sent now."""
    if run.kept_spec_id is not None:
        return
    template = _template(run.benchmark, run.variant, _run_own(run), repeats=run.repeats)
    with transaction.atomic():
        row = spec_keep(template)
        if not Run.objects.filter(id=run.id, kept_spec__isnull=True).update(kept_spec=row):
            row = Run.objects.select_related("kept_spec").get(id=run.id).kept_spec  # kept meanwhile
    run.kept_spec = row
