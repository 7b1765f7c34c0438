"""Two runs (or two commits of one benchmark) side by side: every metric with its delta and
whether the change is outside the noise, and every configuration difference."""
from __future__ import annotations

import re

from django.db.models import Q
from runners.contract import (KV_BYTES_PER_TOKEN, LAUNCH_GAP_MS, MEM_BANDWIDTH_GB_S, METRICS, WEIGHT_BYTES_PER_GPU,
                              workload_points)

from ..models import Benchmark, Measurement, Run
from .runpage import POINT_COLUMNS
from .selectors import run_queryset


class BadCompareQuery(ValueError):
    """A compare parameter is missing or malformed."""


def _significance(a, b) -> str:
    """'significant' when the confidence intervals do not overlap, 'within noise' when they do,
    'no interval' when either run has none (a single sample, or a derived metric)."""
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        return "no interval"
    return "significant" if a.ci_high < b.ci_low or b.ci_high < a.ci_low else "within noise"


def _verdict(direction: str, delta: float, significance: str) -> str:
    if delta == 0 or direction == "none" or significance == "within noise":
        return ""
    better = (delta > 0) == (direction == "higher")
    return "better" if better else "worse"


# The step's time budget closes the table, as on the run page: the floor's inputs, then the
# launch gaps. Every other metric keeps the probes' registration order (decode, correctness,
# allreduce, then plug-ins'), and a metric no probe declares comes last, by name.
BUDGET_LAST = (MEM_BANDWIDTH_GB_S, WEIGHT_BYTES_PER_GPU, KV_BYTES_PER_TOKEN, LAUNCH_GAP_MS)


def metric_order(names) -> list[str]:
    known = [name for name in METRICS if name in names and name not in BUDGET_LAST]
    return (known + [name for name in BUDGET_LAST if name in names]
            + sorted(set(names) - set(METRICS) - set(BUDGET_LAST)))


def metric_rows(a: Run, b: Run) -> list[dict]:
    ma, mb = {m.metric: m for m in a.measurements.all()}, {m.metric: m for m in b.measurements.all()}
    order = metric_order(set(ma) | set(mb))
    rows = []
    for name in order:
        x, y = ma.get(name), mb.get(name)
        info = METRICS.get(name)
        row = {"metric": name, "label": info.label if info else name, "unit": info.unit if info else "",
               "a": x, "b": y, "delta": None, "delta_pct": None, "significance": "", "verdict": ""}
        if x is not None and y is not None:
            row["delta"] = y.value - x.value
            row["delta_pct"] = row["delta"] / x.value if x.value else None
            row["significance"] = _significance(x, y)
            row["verdict"] = _verdict(info.direction if info else "none", row["delta"], row["significance"])
        rows.append(row)
    return rows


POINT_METRICS = tuple(metric for _, metric, _ in POINT_COLUMNS)  # the run page's points table's


def point_rows(a: Run, b: Run) -> list[dict]:
    """The workload points of either run side by side (none when both ran one point): per point
    and metric, A, B and B's change against A."""
    rows = Measurement.all_points.filter(run__in=[a, b], metric__in=POINT_METRICS).values_list(
        "run_id", "point", "metric", "value")
    values: dict[str, dict[str, dict[int, float]]] = {}
    for run_id, point, metric, value in rows:
        values.setdefault(point or a.benchmark.default_point, {}).setdefault(metric, {})[run_id] = value
    if len(values) < 2:
        return []
    out = []
    for point in sorted(values, key=_point_order):
        for metric in POINT_METRICS:
            pair = values[point].get(metric, {})
            x, y = pair.get(a.pk), pair.get(b.pk)
            if x is None and y is None:
                continue
            out.append({"point": point, "metric": metric, "label": METRICS[metric].label, "a": x, "b": y,
                        "delta_pct": (y - x) / x if x and y is not None else None})
    return out


def _point_order(point_id: str) -> tuple:
    """c1 before c16, then by prompt and max tokens (ids are c{c}-p{p}-m{m}[-r{rate}])."""
    return tuple(float(part[1:]) if part[1:].replace(".", "", 1).isdigit() else 0.0 for part in point_id.split("-"))


def _config(run: Run) -> dict[str, str]:
    """What the run ran with: its kept job spec's model and engine settings (a run from before
    specs were kept: the benchmark's and variant's as they are now)."""
    benchmark, variant, build = run.benchmark, run.variant, run.build
    kept = run.kept_spec.spec if run.kept_spec_id is not None else {
        "model": benchmark.model, "tensor_parallel_size": benchmark.tensor_parallel_size,
        "engine_args": [*benchmark.engine_args, *variant.flags], "engine_env": {**benchmark.engine_env, **variant.env},
        "max_tokens": benchmark.max_tokens, "workloads": benchmark.workloads, "packages": benchmark.packages}
    points = workload_points(kept.get("workloads") or [], kept["max_tokens"])
    config = {
        "benchmark": benchmark.name, "variant": variant.name, "model": kept["model"],
        "tensor parallel": str(kept["tensor_parallel_size"]), "pool": benchmark.gpu_pool,
        "flags": " ".join(kept["engine_args"]), "max tokens": str(kept["max_tokens"]),
        "workload points": " ".join(p.id for p in points), "packages": " ".join(kept.get("packages") or []),
        # runs of other settings are other series (regressions/series.py)
        "settings": run.kept_spec.settings[:12] if run.kept_spec_id is not None else "not kept (an older run)",
        "ref": run.ref, "commit": run.commit, "host": run.worker_host,
        "build path": build.path if build else "", "engine version": build.engine_version if build else "",
        "patches": ", ".join(p.name for p in run.patches.all()),
    }
    for key, value in sorted(kept["engine_env"].items()):
        config[f"env {key}"] = str(value)
    return config


def config_rows(a: Run, b: Run) -> list[dict]:
    ca, cb = _config(a), _config(b)
    keys = list(ca) + [k for k in cb if k not in ca]
    return [{"key": k, "a": ca.get(k, ""), "b": cb.get(k, ""), "differs": ca.get(k, "") != cb.get(k, "")} for k in keys]


def compare_queryset():
    return run_queryset().select_related("kept_spec").prefetch_related("measurements", "patches")


def parse_run_ids(a: str | None, b: str | None) -> tuple[int, int]:
    if not (a and b and a.isdigit() and b.isdigit()):
        raise BadCompareQuery(f"compare needs two run ids, ?a=<run id>&b=<run id>; got a={a!r}, b={b!r}")
    return int(a), int(b)


_COMMIT_RE = re.compile(r"^[0-9a-f]{4,64}$")


def parse_commits(a: str | None, b: str | None) -> tuple[str, str]:
    if not (a and b and _COMMIT_RE.match(a) and _COMMIT_RE.match(b)):
        raise BadCompareQuery(f"compare needs two commits (hex, 4-64 characters), ?a=<commit>&b=<commit>; got a={a!r}, b={b!r}")
    return a, b


def commit_pairs(*, benchmark: Benchmark, a: str, b: str) -> list[tuple[Run, Run]]:
    """Per variant, its newest successful run at commit A and at commit B (variants with both)."""
    runs = list(compare_queryset().filter(benchmark=benchmark, state=Run.State.SUCCEEDED)
                .filter(Q(commit__startswith=a) | Q(commit__startswith=b)).order_by("variant__position", "created_at", "id"))
    at_a = {r.variant_id: r for r in runs if r.commit.startswith(a)}
    at_b = {r.variant_id: r for r in runs if r.commit.startswith(b)}
    return [(at_a[v], at_b[v]) for v in at_a if v in at_b]
