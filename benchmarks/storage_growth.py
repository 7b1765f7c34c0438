"""Artifact storage: bytes per run by kind, the growth per day at a commit rate, and what the
retention policy keeps (BENCH_RETAIN_TRACES_DAYS, BENCH_RETAIN_LOGS_DAYS, bench_gc).

    .venv/bin/python benchmarks/storage_growth.py [--json] [--trace-mb 100]
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/storage_growth.py --measured [--json]

By default the sizes are those of the H200 ladder's runs (docs/data/ladder-h200x2.json: Llama-8B
TP=2, the installed engine, its logs and probe JSON inline, whole) and the profiler traces are
--trace-mb per run: that file keeps only the traces' paths, and traces are "tens to hundreds of
MB per run". --measured reads a service's own database instead: the mean Artifact.size per run
of each kind, the share of finished runs that have the kind, and the share of runs the keep
rules protect (bench/retention's own rules over every run, a batch at a time).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LADDER = ROOT / "docs" / "data" / "ladder-h200x2.json"
KINDS = ("profiler_trace", "server_log", "build_log", "probe_json")
MB = 1e6


def growth(sizes: dict, *, runs_per_day: float, traces_days: int, logs_days: int, protected_share: float,
           horizon_days: int = 365) -> dict:
    """Per kind: bytes per run, per day, and stored after HORIZON_DAYS without and with the policy
    (files of protected runs are kept forever; 0 days = forever)."""
    days = {"profiler_trace": traces_days, "server_log": logs_days, "build_log": logs_days, "probe_json": 0}
    rows = {}
    for kind, (size, share) in sizes.items():
        per_day = size * share * runs_per_day
        keep = days[kind]
        if keep and keep < horizon_days:
            kept = per_day * keep + per_day * protected_share * (horizon_days - keep)
        else:
            kept = per_day * horizon_days
        rows[kind] = {"bytes_per_run": size * share, "per_day_mb": per_day / MB,
                      "year_no_policy_gb": per_day * horizon_days / 1e9,
                      "year_with_policy_gb": kept / 1e9, "kept_days": keep or "forever"}
    return rows


def ladder_sizes(path: Path, trace_bytes: float) -> dict:
    """{kind: (bytes per run that has one, share of runs)} from an offline ladder file's inline
    artifacts; the traces, which it keeps only as paths, are TRACE_BYTES on every run."""
    runs = json.loads(path.read_text())["runs"]
    totals, having = dict.fromkeys(KINDS, 0), dict.fromkeys(KINDS, 0)
    for run in runs:
        seen = set()
        for artifact in run["result"].get("artifacts", []):
            if artifact.get("content") is not None:
                totals[artifact["kind"]] += len(artifact["content"].encode())
                seen.add(artifact["kind"])
        for kind in seen:
            having[kind] += 1
    sizes = {kind: (totals[kind] / having[kind], having[kind] / len(runs)) if having[kind] else (0.0, 0.0)
             for kind in KINDS}
    sizes["profiler_trace"] = (trace_bytes, 1.0)
    return sizes


def measured() -> tuple[dict, float, int]:
    """(sizes, protected share, finished runs) of the database in DATABASE_URL."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db.models import Count, Sum

    from benchsite.bench.models import Artifact, Run
    from benchsite.bench.retention.protected import Protector, RunFacts

    finished = Run.objects.filter(state__in=Run.FINAL_STATES)
    total = finished.count()
    if not total:
        raise SystemExit("no finished runs in this database: nothing to measure "
                         "(drop --measured for the ladder's sizes)")
    sizes = {}
    for row in Artifact.objects.values("kind").annotate(runs=Count("run", distinct=True), bytes=Sum("size")):
        sizes[row["kind"]] = (row["bytes"] / row["runs"], row["runs"] / total)
    protector, protected, last = Protector(), 0, 0
    columns = ("id", "benchmark_id", "commit", "created_at")
    while batch := list(finished.filter(id__gt=last).order_by("id").values_list(*columns)[:2000]):
        protected += len(protector.rules_for([RunFacts(*row) for row in batch]))
        last = batch[-1][0]
    return {kind: sizes.get(kind, (0.0, 0.0)) for kind in KINDS}, protected / total, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits-per-day", type=float, default=40)
    parser.add_argument("--benchmarks", type=int, default=10)
    parser.add_argument("--variants", type=int, default=5)
    parser.add_argument("--traces-days", type=int, default=30)
    parser.add_argument("--logs-days", type=int, default=90)
    parser.add_argument("--protected-share", type=float, default=0.02,
                        help="share of runs the keep rules protect, without --measured")
    parser.add_argument("--trace-mb", type=float, default=100, help="profiler trace bytes per run, without --measured")
    parser.add_argument("--measured", action="store_true", help="sizes and protected share from DATABASE_URL")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if min(args.traces_days, args.logs_days) < 0 or not 0 <= args.protected_share <= 1:
        parser.error("days must be 0 (forever) or more, --protected-share between 0 and 1")
    if args.measured:
        sizes, share, runs = measured()
    else:
        sizes, share, runs = ladder_sizes(LADDER, args.trace_mb * MB), args.protected_share, None
    runs_per_day = args.commits_per_day * args.benchmarks * args.variants
    rows = growth(sizes, runs_per_day=runs_per_day, traces_days=args.traces_days, logs_days=args.logs_days,
                  protected_share=share)
    source = "measured" if runs else f"{LADDER.name}, traces {args.trace_mb:g} MB"
    out = {"runs_per_day": runs_per_day, "protected_share": share, "source": source,
           "measured_runs": runs, "kinds": rows,
           "total_per_day_gb": sum(r["per_day_mb"] for r in rows.values()) / 1e3,
           "total_year_no_policy_tb": sum(r["year_no_policy_gb"] for r in rows.values()) / 1e3,
           "total_year_with_policy_tb": sum(r["year_with_policy_gb"] for r in rows.values()) / 1e3}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{runs_per_day:.0f} runs/day ({out['source']}), protected share {share:.1%}")
    print(f"{'kind':16} {'MB/run':>8} {'GB/day':>8} {'kept':>8} {'1 year, no policy GB':>21} {'with policy GB':>15}")
    for kind, r in rows.items():
        print(f"{kind:16} {r['bytes_per_run'] / MB:8.2f} {r['per_day_mb'] / 1e3:8.2f} {str(r['kept_days']):>8} "
              f"{r['year_no_policy_gb']:21.0f} {r['year_with_policy_gb']:15.0f}")
    print(f"total: {out['total_per_day_gb']:.1f} GB/day; after a year {out['total_year_no_policy_tb']:.1f} TB "
          f"without the policy, {out['total_year_with_policy_tb']:.2f} TB with it")


if __name__ == "__main__":
    main()
