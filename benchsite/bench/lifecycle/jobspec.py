"""The job spec a run is sent (runners.contract.JobSpec), frozen when the run is triggered.

What the benchmark and the variant give a job (model, engine arguments and environment,
workloads, probes, packages, repeats, the engine source's repository and default ref, their
patches with their content) is kept in a KeptSpec row, one per distinct content (the sha256 of
its canonical JSON), which the run points at. In that row null stands for what the run holds
itself and never changes: its id, its ref, the commit given at the trigger, the merge base
branch; the run's uploaded patches (Patch rows of its own) follow the kept ones. So a run sent
again (the reaper, a lost message, a held run's release) runs what was triggered, and its
spec.json shows what its worker was sent, whatever `bench_apply` or the admin changed since.

A run from before specs were kept has no row: `spec_rebuilt` builds its spec from the benchmark
and variant as they are now (its page says so), and the first send of such a run keeps it.
"""
from __future__ import annotations

import copy
import hashlib
import json

from django.db import transaction

from runners.contract import BENCHMARK_KEYS, JobSpec, PatchSpec, is_full_sha

from ..models import Benchmark, EngineSource, KeptSpec, Run, Variant

RUN_ENGINE_FIELDS = ("ref", "commit", "merge_base_with")  # the engine values a kept spec may leave to the run


def _patch_specs(patches, origin: str) -> list[dict]:
    return [{"name": p.name, "sha256": p.sha256, "content": p.content, "origin": origin}
            for p in patches.order_by("id")]


def benchmark_patch_specs(benchmark: Benchmark) -> list[dict]:
    return _patch_specs(benchmark.patches, "benchmark")


def _engine(source: EngineSource | None, *, ref: str, commit: str, merge_base_with: str) -> dict:
    if source is None or source.kind != EngineSource.Kind.GIT:
        return {"kind": "installed"}
    commit = commit if is_full_sha(commit) else ""
    if merge_base_with:  # the worker resolves the merge base of the ref and that branch
        return {"kind": "git", "repo": source.repo_url, "ref": ref, "merge_base_with": merge_base_with}
    return {"kind": "git", "repo": source.repo_url, "ref": ref or source.default_ref or commit, "commit": commit}


def _job(benchmark: Benchmark, variant: Variant, *, run_id, repeats, engine: dict, patches: list[dict]) -> dict:
    """The plain-JSON job (no model instance crosses the broker); SpecError if it is not valid."""
    given = {key: getattr(benchmark, key, None) for key in (*BENCHMARK_KEYS, "engine_args", "engine_env")}
    return JobSpec.for_variant(given, {"flags": variant.flags, "env": variant.env}, run_id=run_id,
                               repeats=repeats or None, engine=engine, patches=patches).to_dict()


def spec_rebuilt(run: Run) -> dict:
    """RUN's spec from its benchmark and variant as they are NOW: the benchmark's, the variant's,
    then the run's own patches. For a run without a kept spec only (it may differ from what ran)."""
    patches = [*_patch_specs(run.benchmark.patches, "benchmark"), *_patch_specs(run.variant.patches, "variant"),
               *_patch_specs(run.patches, "run")]
    engine = _engine(run.benchmark.engine_source, ref=run.ref, commit=run.commit, merge_base_with=run.merge_base_with)
    return _job(run.benchmark, run.variant, run_id=run.id, repeats=run.repeats, engine=engine, patches=patches)


def spec_template(benchmark: Benchmark, variant: Variant, *, repeats: int | None, ref: str, commit: str,
                  merge_base_with: str, benchmark_patches: list[dict] | None = None) -> dict:
    """What a run of VARIANT triggered with these values is sent, less what the run holds itself
    (null in its place). REF is the run's `ref` (what the trigger asked for, else its commit).
    SpecError when the benchmark and variant make no valid job."""
    if benchmark_patches is None:
        benchmark_patches = benchmark_patch_specs(benchmark)
    engine = _engine(benchmark.engine_source, ref=ref, commit=commit, merge_base_with=merge_base_with)
    spec = _job(benchmark, variant, run_id=None, repeats=repeats, engine=engine,
                patches=[*benchmark_patches, *_patch_specs(variant.patches, "variant")])
    spec["engine"] = _engine_kept(spec["engine"], ref=ref, commit=commit, merge_base_with=merge_base_with)
    return spec


def _engine_kept(sent: dict, *, ref: str, commit: str, merge_base_with: str) -> dict:
    """The engine part of a kept spec: null where it is the run's own ref, commit or merge base."""
    if sent["kind"] == "git":
        own = {"ref": ref, "commit": commit if is_full_sha(commit) else "", "merge_base_with": merge_base_with}
        for key in RUN_ENGINE_FIELDS:
            if own[key] and sent.get(key) == own[key]:
                sent[key] = None
    return sent


def canonical_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256(spec: dict) -> str:
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()


# What a kept spec holds that cannot move a figure: how many timed repeats (the precision, not the
# level), how long the engine may take to start, and the spec's format.
UNSETTLED_KEYS = ("run_id", "repeats", "startup_timeout_s", "schema")


def settings_digest(template: dict) -> str:
    """The sha256 of what in TEMPLATE (a kept spec) can move a figure: the model, prompt, tokens,
    warm-up, tensor parallelism, engine arguments and environment, workloads (they size the
    engine), probes (they add engine arguments), packages, the patches' content and the engine's
    repository; not the ref or commit (which code runs is the series' timeline) nor UNSETTLED_KEYS.
    Runs of a benchmark whose settings differ are not one series (regressions/series.py)."""
    settings = {key: value for key, value in template.items() if key not in UNSETTLED_KEYS}
    engine = settings.get("engine") or {}
    settings["engine"] = {key: engine.get(key) for key in ("kind", "repo")}
    settings["patches"] = [patch.get("sha256") for patch in settings.get("patches") or []]
    return _sha256(settings)


def spec_keep(template: dict) -> KeptSpec:
    """The row holding TEMPLATE, made the first time it is seen. Locked until the caller's
    transaction ends, so bench_gc cannot collect it before the run that points at it is stored."""
    with transaction.atomic():
        row, _ = KeptSpec.objects.select_for_update().get_or_create(
            sha256=_sha256(template), defaults={"spec": template, "settings": settings_digest(template)})
    return row


def template_like(kept: KeptSpec, benchmark: Benchmark, *, ref: str, commit: str, merge_base_with: str,
                  repeats: int | None) -> dict:
    """KEPT's spec for a run of another commit: its settings (everything settings_digest reads) as
    they were, the engine's ref, commit and merge base the new run's, its repeats REPEATS (None:
    the kept ones). A confirmation or a bisection step measures what its series measured, whatever
    `bench_apply` changed since."""
    template = copy.deepcopy(kept.spec)
    engine = template.get("engine") or {}
    if engine.get("kind") == "git":
        source = EngineSource(kind=EngineSource.Kind.GIT, repo_url=engine["repo"],
                              default_ref=getattr(benchmark.engine_source, "default_ref", "") or "")
        template["engine"] = _engine_kept(_engine(source, ref=ref, commit=commit, merge_base_with=merge_base_with),
                                          ref=ref, commit=commit, merge_base_with=merge_base_with)
    if repeats is not None:
        template["repeats"] = repeats
    return template


def check_run_patches(patches) -> None:
    """SpecError if an uploaded patch could not travel in a job (too big)."""
    for patch in patches:
        PatchSpec(name=patch.name, content=patch.content)


def spec_sent(run: Run) -> dict | None:
    """The spec RUN was (or will be) sent: its kept part with the run's own values put back;
    None for a run without a kept spec."""
    if run.kept_spec_id is None:
        return None
    spec = copy.deepcopy(run.kept_spec.spec)
    spec["run_id"] = run.id
    engine = spec.get("engine") or {}
    for key in RUN_ENGINE_FIELDS:
        if key in engine and engine[key] is None:
            engine[key] = getattr(run, key)
    spec["patches"] = [*(spec.get("patches") or []), *_patch_specs(run.patches, "run")]
    return JobSpec.from_dict(spec).to_dict()


def run_spec(run: Run) -> dict:
    """The spec RUN is sent: its kept one, or for a run from before they were kept, the rebuilt one."""
    sent = spec_sent(run)
    return sent if sent is not None else spec_rebuilt(run)


def run_spec_keep(run: Run) -> None:
    """Keep the spec of a run that has none (queued before specs were kept), as it is sent now."""
    if run.kept_spec_id is not None:
        return
    template = spec_template(run.benchmark, run.variant, repeats=run.repeats, ref=run.ref, commit=run.commit,
                             merge_base_with=run.merge_base_with)
    with transaction.atomic():
        row = spec_keep(template)
        if not Run.objects.filter(id=run.id, kept_spec__isnull=True).update(kept_spec=row):
            row = Run.objects.select_related("kept_spec").get(id=run.id).kept_spec  # kept meanwhile
    run.kept_spec = row
