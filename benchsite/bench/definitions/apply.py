"""Benchmarks as code: a YAML file of benchmarks, their ladders, repository watches and alert
subscriptions, applied idempotently. bench applies `benchmarks:`; the apps that own watches and
subscriptions apply theirs (sections.py). Every change is listed; a dry run applies in a transaction
that is rolled back."""
import yaml
from django.db import models, transaction
from django.utils import timezone

from benchsite.bench.domain import home_cache
from benchsite.bench.domain.repos import RepoURLError, repo_key
from benchsite.bench.models import Annotation, Benchmark, EngineSource, Variant
from runners.contract import BENCHMARK_SETTINGS, VARIANT_SETTINGS

from .entries import ApplyError, Outcome, clean, diff, mapping, snapshot
from .sections import REGISTERED_SECTIONS, SECTIONS, benchmark_checks, section

__all__ = ["ApplyError", "Outcome", "config_apply", "config_load"]

_BENCHMARK_EXTRA = {"engine", "variants"}
_BENCHMARK_SKIP = {"id", "created_at", "engine_source"}
_VARIANT_FIELDS = {"name": "name", "flags": "flags", "env": "env", "reference": "is_reference", "builds_on": "builds_on"}
_POSITION_SHIFT = 1000  # moves a ladder out of the way while it is renumbered (unique positions)
# The fields whose change can move a figure (the contract's settings: contract.settings_digest): runs
# after it are a new series, which an annotation on every chart of the benchmark says.
_SETTINGS_FIELDS = (*BENCHMARK_SETTINGS, "engine_source_id", *VARIANT_SETTINGS)


def config_load(text: str) -> dict:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ApplyError(f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ApplyError("the file must be a mapping with `benchmarks:`, `watches:` and/or `subscriptions:`")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ApplyError(f"unknown top-level keys {unknown}; use {', '.join(SECTIONS)}")
    for key in SECTIONS:
        if not isinstance(data.get(key) or [], list):
            raise ApplyError(f"`{key}` must be a list")
    return data


def config_apply(*, data: dict, dry_run: bool = False) -> Outcome:
    """Create or update what the file describes; nothing is deleted (it is listed in notes)."""
    outcome = Outcome()
    with transaction.atomic():
        for i, spec in enumerate(data.get("benchmarks") or []):
            _benchmark_apply(mapping(spec, f"benchmarks[{i}]"), f"benchmarks[{i}]", outcome)
        for name in REGISTERED_SECTIONS:
            if data.get(name):
                section(name).apply(data[name], outcome)
        if dry_run:
            transaction.set_rollback(True)
    return outcome


def _benchmark_fields() -> dict[str, models.Field]:
    return {f.name: f for f in Benchmark._meta.concrete_fields if f.editable and f.name not in _BENCHMARK_SKIP}


def _check_json_shape(field_: models.Field, value, where: str) -> None:
    """A JSON field whose default is a list (flags) or a dict (env) takes only that shape."""
    if isinstance(field_, models.JSONField) and callable(field_.default):
        shape = type(field_.default())
        if not isinstance(value, shape):
            raise ApplyError(f"{where}: {field_.name} must be a {'list' if shape is list else 'mapping'}")


def _benchmark_apply(spec: dict, where: str, outcome: Outcome) -> Benchmark:
    fields = _benchmark_fields()
    slug = spec.get("slug")
    if not isinstance(slug, str) or not slug:
        raise ApplyError(f"{where}: `slug` is required")
    where = f"{where} ({slug})"
    unknown = sorted(set(spec) - set(fields) - _BENCHMARK_EXTRA)
    if unknown:
        raise ApplyError(f"{where}: unknown fields {unknown}; allowed: {sorted(set(fields) | _BENCHMARK_EXTRA)}")
    benchmark = Benchmark.objects.filter(slug=slug).first()
    creating = benchmark is None
    benchmark = benchmark or Benchmark(slug=slug)
    given = [name for name in spec if name in fields]
    before = snapshot(benchmark, [*given, "engine_source_id"])
    for name in given:
        _check_json_shape(fields[name], spec[name], where)
        setattr(benchmark, name, spec[name])
    benchmark.engine_source = _engine_source(spec.get("engine"), where, outcome)
    for check in benchmark_checks():
        check(benchmark, where)
    clean(benchmark, where)
    changed = diff(before, benchmark)
    if creating or changed:
        benchmark.save()
        outcome.changes.append(f"create benchmark {slug}" if creating else f"update benchmark {slug}: " + ", ".join(changed))
    if not creating:
        _note_settings_change(benchmark, "", before, benchmark)
    if "variants" in spec:
        _variants_apply(benchmark, spec["variants"], where, outcome)
    return benchmark


def _engine_source(spec, where: str, outcome: Outcome) -> EngineSource | None:
    """`engine: {repo: URL}` -> the git EngineSource of that repository (any URL form), made once."""
    if spec is None:
        return None  # the worker's installed engine
    if not isinstance(spec, dict) or set(spec) != {"repo"} or not isinstance(spec["repo"], str):
        raise ApplyError(f"{where}: engine must be {{repo: URL}} (leave it out for the installed engine)")
    try:
        key = repo_key(spec["repo"])
    except RepoURLError as exc:
        raise ApplyError(f"{where}: engine: {exc}") from None
    for source in EngineSource.objects.filter(kind=EngineSource.Kind.GIT).exclude(repo_url=""):
        try:
            if repo_key(source.repo_url) == key:
                return source
        except RepoURLError:
            continue
    source = EngineSource(name=key[:100], kind=EngineSource.Kind.GIT, repo_url=spec["repo"])
    clean(source, f"{where}: engine")
    source.save()
    outcome.changes.append(f"create engine source {key} ({spec['repo']})")
    return source


def _variants_apply(benchmark: Benchmark, specs, where: str, outcome: Outcome) -> None:
    if not isinstance(specs, list) or not specs:
        raise ApplyError(f"{where}: variants must be a non-empty list")
    names = []
    for i, spec in enumerate(specs):
        spec = mapping(spec, f"{where}.variants[{i}]")
        unknown = sorted(set(spec) - set(_VARIANT_FIELDS))
        if unknown:
            raise ApplyError(f"{where}.variants[{i}]: unknown fields {unknown}; allowed: {sorted(_VARIANT_FIELDS)}")
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            raise ApplyError(f"{where}.variants[{i}]: `name` is required")
        names.append(spec["name"])
    if len(set(names)) != len(names):
        raise ApplyError(f"{where}: variant names repeat: {names}")
    for i, spec in enumerate(specs):
        base = spec.get("builds_on")
        if base is not None and (not isinstance(base, str) or base not in names or base == spec["name"]):
            raise ApplyError(f"{where}.variants[{i}]: builds_on must name another variant of this ladder "
                             f"({[n for n in names if n != spec['name']]}), not {base!r}")
    existing = {v.name: v for v in benchmark.variants.all()}
    extra = sorted((v for n, v in existing.items() if n not in names), key=lambda v: v.position)
    target = {name: i + 1 for i, name in enumerate(names)} | {v.name: len(names) + 1 + i for i, v in enumerate(extra)}
    shifted = any(v.position != target[n] for n, v in existing.items())
    if shifted:  # in the database only: the objects keep their old positions for the change list
        benchmark.variants.update(position=models.F("position") + _POSITION_SHIFT)
        home_cache.note_change(benchmark.pk)  # an update sends no signal: the home page's order
    for i, spec in enumerate(specs):
        _variant_apply(benchmark, existing.get(spec["name"]), spec, target[spec["name"]], f"{where}.variants[{i}]",
                       outcome, must_save=shifted)
    for v in extra:
        if shifted:
            Variant.objects.filter(id=v.id).update(position=target[v.name])
        outcome.notes.append(f"variant {benchmark.slug}/{v.name} is not in the file: kept (delete it in the admin)")
    _builds_on_apply(benchmark, specs, outcome)


def _builds_on_apply(benchmark: Benchmark, specs, outcome: Outcome) -> None:
    """Which step each variant builds on (the waterfall's base; absent: the previous position),
    once every variant of the file exists."""
    by_name = {v.name: v for v in benchmark.variants.select_related("builds_on")}
    for spec in specs:
        variant, base = by_name[spec["name"]], spec.get("builds_on")
        target = by_name[base] if base else None
        if variant.builds_on_id != (target.pk if target else None):
            old = variant.builds_on.name if variant.builds_on else "the previous step"
            variant.builds_on = target
            variant.save(update_fields=["builds_on"])
            outcome.changes.append(f"update variant {benchmark.slug}/{variant.name}: builds_on: {old} -> "
                                   f"{base or 'the previous step'}")


def _variant_apply(benchmark, variant, spec, position, where, outcome, must_save: bool) -> None:
    creating = variant is None
    variant = variant or Variant(benchmark=benchmark, name=spec["name"], position=position)
    values = {"flags": spec.get("flags", []), "env": spec.get("env", {}), "is_reference": spec.get("reference", False),
              "position": position}
    for name in ("flags", "env"):
        _check_json_shape(Variant._meta.get_field(name), values[name], where)
    before = snapshot(variant, values)
    for name, value in values.items():
        setattr(variant, name, value)
    clean(variant, where, validate_unique=False, validate_constraints=False)
    changed = diff(before, variant)
    if creating or changed or must_save:
        variant.save()
    if creating:
        outcome.changes.append(f"create variant {benchmark.slug}/{variant.name} at position {position}")
    elif changed:
        outcome.changes.append(f"update variant {benchmark.slug}/{variant.name}: " + ", ".join(changed))
        _note_settings_change(benchmark, variant.name, before, variant)


def _note_settings_change(benchmark: Benchmark, variant: str, before: dict, obj: models.Model) -> None:
    """An annotation on the benchmark's charts when fields of its settings changed (a series restarts)."""
    names = [name.removesuffix("_id") for name in _SETTINGS_FIELDS if name in before and getattr(obj, name) != before[name]]
    if names:
        whose = f"variant {variant}" if variant else "benchmark"
        text = f"settings changed ({whose}: {', '.join(names)}): a new series from here (bench_apply)"
        Annotation.objects.create(benchmark=benchmark, text=text[:200], starts_at=timezone.now())
