"""Inject every fault of tests/faults for real and print what the service survived.

    python benchmarks/faults.py            # a table, with each fault's evidence
    python benchmarks/faults.py --json     # {"faults": [{"name", "injected", "survived", "runs_lost", "recovery_s"}]}

Each fault gets a fresh private Redis and fresh Celery workers (web with beat, GPU) against a
database of its own (by default a PostgreSQL database bench_faults_<pid> created on --postgres
and dropped after; or --database-url), and the fake engine (tests/faults/fake_engine.py, a real
process group). database_down puts a TCP proxy between the workers and PostgreSQL and cuts it.
Nothing shared is touched.
recovery_s: worker_sigkill, from the kill to the run failed with the reason; engine_hang/exit,
from the run starting to it failing; redis_restart, from Redis back to both runs final;
duplicate_delivery, from the second worker's start to the duplicate skipped; cancel_running,
from the cancel to the late messages refused (the engine group itself goes sooner);
database_down, from the database back to the run's result stored; disk_full_artifacts (the
workers' artifact storage a full 1 MiB tmpfs: needs root), from the trigger to the run final with
its measurements and every artifact marked "disk full (ENOSPC)".
"""
import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FAULTS = ("worker_sigkill", "engine_hang", "engine_exit", "redis_restart", "duplicate_delivery", "cancel_running",
          "database_down", "disk_full_artifacts")


def _run_one(name: str, base: Path, database_url: str) -> dict:
    from benchmarks.fault_service import running_service
    from benchsite.bench.models import Benchmark, Run
    from tests.faults import scenarios
    from tests.faults.harness import FullDisk, fault_benchmark

    work = base / name
    work.mkdir(parents=True)
    Benchmark.objects.filter(slug="faults").delete()
    visibility = 3 if name == "duplicate_delivery" else 3600
    env = dict(scenarios.DATABASE_DOWN_ENV) if name == "database_down" else {}
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(FullDisk(work / "artifacts-disk")) if name == "disk_full_artifacts" else None
        if disk is not None:
            env["BENCH_ARTIFACTS_DIR"] = str(disk.path)
        running = stack.enter_context(running_service(work, database_url, env, proxied=name == "database_down",
                                                      visibility_timeout_s=visibility))
        svc = scenarios.Service(redis=running.redis, workers=running.workers, benchmark=fault_benchmark(work / "gate"),
                                gate=work / "gate", db_proxy=running.db_proxy)
        t0 = time.monotonic()
        try:
            if name.startswith("engine_"):
                figures = scenarios.engine_fault(svc, name.removeprefix("engine_"))
            elif disk is not None:
                figures = scenarios.disk_full_artifacts(svc, disk)
            else:
                figures = getattr(scenarios, name)(svc)
        except AssertionError as exc:
            time.sleep(2)
            lost = Run.objects.filter(benchmark=svc.benchmark).exclude(state__in=Run.FINAL_STATES).count()
            figures = {"name": name, "injected": 1, "survived": False, "runs_lost": lost, "recovery_s": None,
                       "details": {"error": str(exc)[:2000]}}
    figures["details"]["scenario_s"] = round(time.monotonic() - t0, 1)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print only the JSON figures")
    parser.add_argument("--only", default=",".join(FAULTS), help=f"comma-separated subset of {','.join(FAULTS)}")
    parser.add_argument("--database-url", default="", help="default: a database of its own on --postgres")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432",
                        help="the PostgreSQL server for that database (default %(default)s)")
    args = parser.parse_args()
    chosen = [f.strip() for f in args.only.split(",") if f.strip()]
    unknown = sorted(set(chosen) - set(FAULTS))
    if unknown:
        parser.error(f"unknown faults {unknown}; choose from {list(FAULTS)}")
    if "database_down" in chosen and args.database_url and not args.database_url.startswith("postgres"):
        parser.error("database_down cuts a TCP proxy in front of PostgreSQL: give a postgres:// --database-url")
    from benchmarks.fault_service import setup_django
    from benchmarks.pgdb import private_database

    with tempfile.TemporaryDirectory(prefix="faults-") as tmp, contextlib.ExitStack() as stack:
        base = Path(tmp)
        database_url = args.database_url or stack.enter_context(private_database(args.postgres, "bench_faults"))
        setup_django(database_url)
        results = [_run_one(name, base, database_url) for name in chosen]
    if args.json:
        keys = ("name", "injected", "survived", "runs_lost", "recovery_s")
        print(json.dumps({"faults": [{k: r[k] for k in keys} for r in results]}))
    else:
        print(f"{'fault':<20} {'injected':>8} {'survived':>8} {'runs lost':>9} {'recovery s':>10}")
        for r in results:
            print(f"{r['name']:<20} {r['injected']:>8} {str(r['survived']):>8} {r['runs_lost']:>9} "
                  f"{r['recovery_s'] if r['recovery_s'] is not None else '-':>10}")
            for key, value in r["details"].items():
                print(f"    {key}: {str(value).splitlines()[0][:160] if value else value}")
    return 0 if all(r["survived"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
