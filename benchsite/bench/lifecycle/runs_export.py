"""An export of `GET /api/runs/` (the service's runs as another database held them, e.g.
docs/data/service-h200x2-runs.json) read as a `runners ladder` result file, so `runs_import`
loads it like one: same batch, the measured times, measurements with their per-repeat flags,
took-effect reports, host and build.

The export names its benchmark and variants but carries neither's settings (model, flags,
environment): the benchmark must exist here first, applied from its benchmarks-as-code file
(`manage.py bench_apply benchmarks/gpu/service-h200x2.yaml`).

    ladder = ladder_from_export(json.loads(path.read_text()))
    imports.runs_import(data=ladder)
"""
from __future__ import annotations

from datetime import datetime

from runners.contract import LadderFile

from ..models import Annotation, Benchmark, Run


FINISHED = (Run.State.SUCCEEDED, Run.State.FAILED, Run.State.CANCELLED)
_MEASUREMENT_KEYS = ("metric", "value", "unit", "direction", "ci_low", "ci_high", "details")


class ExportError(ValueError):
    """Not a readable runs export, or it does not fit the benchmark here (the message says why)."""


def is_runs_export(data) -> bool:
    """A `{"runs": [...]}` document of the runs API (no ladder `format`)."""
    return (isinstance(data, dict) and "format" not in data and isinstance(data.get("runs"), list)
            and all(isinstance(r, dict) and "measurements" in r and "variant" in r for r in data["runs"]))


def _epoch(text: str | None, where: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        raise ExportError(f"{where}: {text!r} is not an ISO date") from None


def _measurement(m: dict) -> dict:
    """The stored form back: every repeat with its flag (the API's `samples` are the clean ones)."""
    out = {k: m.get(k) for k in _MEASUREMENT_KEYS}
    out["samples"] = m.get("all_samples", m.get("samples", []))
    out["sample_flags"] = m.get("sample_flags", [])
    out["details"] = out["details"] or {}
    if isinstance(m.get("point"), str) and m["point"]:  # an export from before workload points has none
        out["point"] = m["point"]
    return out


def _benchmark_spec(benchmark: Benchmark) -> dict:
    keys = ("name", "slug", "description", "model", "tensor_parallel_size", "prompt", "max_tokens", "repeats", "warmup",
            "engine_args", "engine_env", "startup_timeout_s")
    return {key: getattr(benchmark, key) for key in keys}


def _variant_spec(variant) -> dict:
    return {"name": variant.name, "flags": variant.flags, "env": variant.env, "is_reference": variant.is_reference}


def _entry(run: dict, variant, where: str) -> dict:
    entry = {"variant": _variant_spec(variant), "state": run["state"],
             "created_at": _epoch(run.get("created_at"), f"{where} created_at"),
             "started_at": _epoch(run.get("started_at"), f"{where} started_at"),
             "finished_at": _epoch(run.get("finished_at"), f"{where} finished_at")}
    if run["state"] != Run.State.SUCCEEDED:
        return {**entry, "error": run.get("error") or run["state"].lower(), "artifacts": []}
    result = {"measurements": [_measurement(m) for m in run["measurements"]], "artifacts": [],
              "took_effect": run.get("took_effect") or {}, "host": run.get("host_info") or {}}
    if run.get("build"):
        result["build"] = run["build"]
    return {**entry, "result": result}


def ladder_from_export(data: dict) -> dict:
    """The export as a ladder result file of its benchmark (ExportError when it cannot be)."""
    if not is_runs_export(data) or not data["runs"]:
        raise ExportError('not an export of /api/runs/ (expected {"runs": [{"benchmark", "variant", "measurements", ...}]})')
    slugs = {r.get("benchmark") for r in data["runs"]}
    if len(slugs) != 1:
        raise ExportError(f"the export mixes benchmarks {sorted(map(str, slugs))}: export one benchmark at a time")
    slug = slugs.pop()
    benchmark = Benchmark.objects.filter(slug=slug).first()
    if benchmark is None:
        raise ExportError(f"no benchmark {slug!r} here: apply its benchmarks-as-code file first "
                          f"(manage.py bench_apply FILE); the export carries no model, flags or environment")
    variants = {v.name: v for v in benchmark.variants.all()}
    missing = sorted({r["variant"].get("name") for r in data["runs"]} - set(variants))
    if missing:
        raise ExportError(f"benchmark {slug!r} has no variants {missing}; it has {sorted(variants)}")
    runs = [r for r in data["runs"] if r.get("state") in FINISHED]
    runs.sort(key=lambda r: (r.get("started_at") or r.get("created_at") or "", r.get("id") or 0))
    host = next((r.get("host_info") for r in runs if r.get("host_info")), {}) or {}
    return LadderFile(benchmark=_benchmark_spec(benchmark),
                      variants=[_variant_spec(v) for v in benchmark.variants.order_by("position")],
                      host={"hostname": host.get("hostname") or next((r.get("worker_host") for r in runs), "")},
                      runs=[_entry(r, variants[r["variant"]["name"]], f"run {r.get('id')}") for r in runs]).to_dict()


def runs_export_import(*, data: dict, note: str = "") -> list[Run]:
    """Import the export as one batch (imports.runs_import); NOTE, when given, becomes an
    annotation over the time the runs were measured (the waterfall and the charts show it)."""
    from .imports import runs_import

    runs = runs_import(data=ladder_from_export(data))
    if note and runs:
        times = Run.objects.filter(id__in=[r.id for r in runs]).values_list("created_at", "finished_at")
        Annotation.objects.create(benchmark=runs[0].benchmark, created_by=None, text=note,
                                  starts_at=min(t[0] for t in times), ends_at=max(t[1] or t[0] for t in times))
    return runs
