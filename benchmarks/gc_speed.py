"""bench_gc at scale: a private PostgreSQL database seeded with RUNS finished runs 200 days old
(a server log, a build log, a profiler trace and a probe JSON each, as rows; files of one byte in
a temporary folder), a change point every 100 runs and a commit annotation; then a dry run, the
pass that frees, and a second pass that finds nothing. Prints seconds and peak RSS per pass.

    .venv/bin/python benchmarks/gc_speed.py --runs 50000 [--postgres postgres://postgres@127.0.0.1:5432] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
KINDS = ("server_log", "build_log", "profiler_trace", "probe_json")


def _setup(database_url: str, artifacts_dir: Path) -> None:
    os.environ.update(DATABASE_URL=database_url, BENCH_ARTIFACTS_DIR=str(artifacts_dir), BENCH_LOG_LEVEL="WARNING",
                      DJANGO_SETTINGS_MODULE="benchsite.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _seed(runs: int, artifacts_dir: Path) -> None:
    from django.utils import timezone

    from benchsite.bench.models import Annotation, Artifact, Benchmark, Run, Variant
    from benchsite.regressions.models import ChangePoint

    old = timezone.now() - timedelta(days=200)
    benchmark = Benchmark.objects.create(name="gc", slug="gc", model="/models/m")
    variants = [Variant.objects.create(benchmark=benchmark, position=i + 1, name=f"v{i}", is_reference=i == 0)
                for i in range(5)]
    for start in range(0, runs, 5000):
        rows = [Run(benchmark=benchmark, variant=variants[i % 5], batch=uuid.uuid4(), state=Run.State.SUCCEEDED,
                    commit=f"{i // 5:040x}", created_at=old, finished_at=old)
                for i in range(start, min(runs, start + 5000))]
        Run.objects.bulk_create(rows)
        files = []
        for run in rows:
            for kind in KINDS:
                name = f"runs/{run.id}/{kind}"
                files.append(Artifact(run=run, kind=kind, name=kind, file=name, size=1, sha256=""))
                (artifacts_dir / "runs" / str(run.id)).mkdir(parents=True, exist_ok=True)
                (artifacts_dir / name).write_bytes(b"x")
        Artifact.objects.bulk_create(files)
    Artifact.objects.update(created_at=old)
    ids = list(Run.objects.order_by("id").values_list("id", "variant_id"))
    ChangePoint.objects.bulk_create([
        ChangePoint(benchmark=benchmark, variant_id=ids[i][1], series_key="s", metric="decode_tok_s", run_id=ids[i][0],
                    previous_run_id=ids[i - 5][0], index=i, before=1.0, after=0.9) for i in range(100, runs, 100)])
    Annotation.objects.create(benchmark=benchmark, text="note", commit=f"{7:040x}")


def _timed(**kwargs) -> dict:
    from benchsite.bench.retention.collect import collect
    from benchsite.bench.retention.policy import Policy

    t0 = time.perf_counter()
    report = collect(policy=Policy(traces_days=30, logs_days=90), **kwargs)
    return {"s": round(time.perf_counter() - t0, 2), "freed": sum(report.freed.values()),
            "kept": sum(report.kept.values()), "failed": len(report.failed),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.runs < 200:
        parser.error("--runs must be at least 200")
    from benchmarks.pgdb import private_database

    with tempfile.TemporaryDirectory(prefix="gc-speed-") as tmp, private_database(args.postgres, "retain_gc") as url:
        folder = Path(tmp) / "artifacts"
        folder.mkdir()
        _setup(url, folder)
        t0 = time.perf_counter()
        _seed(args.runs, folder)
        figures = {"runs": args.runs, "artifacts": args.runs * len(KINDS), "seed_s": round(time.perf_counter() - t0, 1),
                   "dry_run": _timed(dry_run=True), "free": _timed(), "second_pass": _timed(),
                   "files_left": sum(1 for p in folder.rglob("*") if p.is_file())}
    print(json.dumps(figures, indent=None if args.json else 1))
    return 0 if figures["free"]["failed"] == 0 and figures["second_pass"]["freed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
