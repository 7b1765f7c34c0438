"""A benchmark's whole ladder, offline: each variant in order, one result file.

For GPU hosts that the service cannot reach: run here, carry the file back, and load it with
`manage.py bench_import FILE`. The ladder file is what the service would send:

    {"benchmark": {"name", "slug", "model", "tensor_parallel_size", "prompt", "max_tokens",
                   "repeats", "warmup", "engine_args", "engine_env", "startup_timeout_s", "probes"},
     "variants": [{"name", "flags", "env", "is_reference", "builds_on"}, ...]}

(`builds_on`, optional: the name of the step a variant changes, for the waterfall; default the
previous one.)

`--only 2,3 --out results.json` runs some variants and merges them into an existing file, so
a long ladder can be split over several sessions of a leased machine.
"""
import json
import re
import sys
import time
from pathlib import Path

from . import contract
from .config import RunnerConfig
from .contract import JobSpec, LadderFile, SpecError
from .hostinfo import host_info
from .outputs.artifacts import inline_for_file
from .job import JobError, run_job
from .probes.registry import load_probe_modules


def run_variant(benchmark: dict, variant: dict, *, work_dir: Path, runner_config: RunnerConfig | None = None) -> dict:
    def report(phase, state=None):
        print(f"[{time.strftime('%H:%M:%S')}] {variant['name']}: {phase}", file=sys.stderr, flush=True)

    started = time.time()
    try:
        spec = JobSpec.for_variant(benchmark, variant)  # as the service builds its jobs
        result = run_job(spec, work_dir=work_dir, report=report, runner_config=runner_config).to_dict()
        result["artifacts"] = inline_for_file(result["artifacts"])  # the result file is imported elsewhere
        entry = {"state": "SUCCEEDED", "result": result}
    except SpecError as exc:
        report(f"FAILED: {exc}")
        entry = {"state": "FAILED", "error": f"job spec: {exc}", "artifacts": []}
    except JobError as exc:
        report(f"FAILED: {str(exc).splitlines()[0]}")
        entry = {"state": "FAILED", "error": str(exc), "artifacts": inline_for_file(exc.artifacts)}
    return {"variant": variant, "started_at": started, "finished_at": time.time(), **entry}


def run_ladder(ladder: dict, *, work_dir: Path, only: set[int] | None = None, previous: dict | None = None,
               save=lambda result: None, runner_config: RunnerConfig | None = None) -> dict:
    """Run the variants in order; `save` gets the merged result after each one, so a run cut
    short by a time limit keeps what it finished. RUNNER_CONFIG: default from_env(), read once."""
    runner_config = runner_config if runner_config is not None else RunnerConfig.from_env()
    benchmark, variants = ladder["benchmark"], ladder["variants"]
    runs = {r["variant"]["name"]: r for r in (previous or {}).get("runs", [])}

    def merged() -> dict:
        ordered = [runs[v["name"]] for v in variants if v["name"] in runs]
        return LadderFile(benchmark=benchmark, variants=variants, host=host_info(), runs=ordered).to_dict()

    for index, variant in enumerate(variants):
        if only is not None and index not in only:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", variant["name"].lower()).strip("-")
        runs[variant["name"]] = run_variant(benchmark, variant, work_dir=work_dir / f"{index:02d}-{slug}",
                                            runner_config=runner_config)
        save(merged())
    return merged()


def add_arguments(parser):
    parser.add_argument("ladder", type=Path, help="ladder JSON (benchmark + variants)")
    parser.add_argument("--out", type=Path, required=True, help="result file; merged into when it exists")
    parser.add_argument("--only", help="comma-separated variant indexes (0-based) to run now")
    parser.add_argument("--work-dir", type=Path, default=Path("var/work/ladder"))


def main(args) -> int:
    runner_config = RunnerConfig.from_env()
    load_probe_modules(runner_config.probe_modules)
    ladder = json.loads(args.ladder.read_text())
    contract.check_probe_names(ladder["benchmark"].get("probes"))
    only = {int(i) for i in args.only.split(",")} if args.only else None
    previous = json.loads(args.out.read_text()) if args.out.exists() else None
    result = run_ladder(ladder, work_dir=args.work_dir, only=only, previous=previous,
                        save=lambda r: args.out.write_text(json.dumps(r, indent=1)),
                        runner_config=runner_config)
    for run in result["runs"]:
        decode = next((m for m in run.get("result", {}).get("measurements", []) if m["metric"] == contract.DECODE_TOK_S), None)
        figure = f"{decode['value']:.1f} tok/s" if decode else run.get("error", "").splitlines()[0][:100]
        print(f"{run['variant']['name']:<40} {run['state']:<10} {figure}")
    return 0 if all(r["state"] == "SUCCEEDED" for r in result["runs"]) else 1
