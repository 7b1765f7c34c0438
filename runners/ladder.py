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
import platform
import re
import socket
import sys
import time
from pathlib import Path

from . import contract
from .artifacts import inline_for_file
from .job import JobError, run_job

FORMAT = "decode-bench-ladder/1"
BENCHMARK_KEYS = ("model", "tensor_parallel_size", "prompt", "max_tokens", "repeats", "warmup", "startup_timeout_s",
                  "probes")


def variant_spec(benchmark: dict, variant: dict) -> dict:
    spec = {key: benchmark[key] for key in BENCHMARK_KEYS if key in benchmark}
    spec["engine_args"] = [*benchmark.get("engine_args", []), *variant.get("flags", [])]
    spec["engine_env"] = {**benchmark.get("engine_env", {}), **variant.get("env", {})}
    return spec


def host_info() -> dict:
    info = {"hostname": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version()}
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except ImportError:
        pass
    return info


def run_variant(benchmark: dict, variant: dict, *, work_dir: Path) -> dict:
    def report(phase, state=None):
        print(f"[{time.strftime('%H:%M:%S')}] {variant['name']}: {phase}", file=sys.stderr, flush=True)

    started = time.time()
    try:
        result = run_job(variant_spec(benchmark, variant), work_dir=work_dir, report=report)
        result["artifacts"] = inline_for_file(result["artifacts"])  # the result file is imported elsewhere
        entry = {"state": "SUCCEEDED", "result": result}
    except JobError as exc:
        report(f"FAILED: {str(exc).splitlines()[0]}")
        entry = {"state": "FAILED", "error": str(exc), "artifacts": inline_for_file(exc.artifacts)}
    return {"variant": variant, "started_at": started, "finished_at": time.time(), **entry}


def run_ladder(ladder: dict, *, work_dir: Path, only: set[int] | None = None, previous: dict | None = None,
               save=lambda result: None) -> dict:
    """Run the variants in order; `save` gets the merged result after each one, so a run cut
    short by a time limit keeps what it finished."""
    benchmark, variants = ladder["benchmark"], ladder["variants"]
    runs = {r["variant"]["name"]: r for r in (previous or {}).get("runs", [])}

    def merged() -> dict:
        ordered = [runs[v["name"]] for v in variants if v["name"] in runs]
        return {"format": FORMAT, "benchmark": benchmark, "variants": variants, "host": host_info(), "runs": ordered}

    for index, variant in enumerate(variants):
        if only is not None and index not in only:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", variant["name"].lower()).strip("-")
        runs[variant["name"]] = run_variant(benchmark, variant, work_dir=work_dir / f"{index:02d}-{slug}")
        save(merged())
    return merged()


def add_arguments(parser):
    parser.add_argument("ladder", type=Path, help="ladder JSON (benchmark + variants)")
    parser.add_argument("--out", type=Path, required=True, help="result file; merged into when it exists")
    parser.add_argument("--only", help="comma-separated variant indexes (0-based) to run now")
    parser.add_argument("--work-dir", type=Path, default=Path("var/work/ladder"))


def main(args) -> int:
    ladder = json.loads(args.ladder.read_text())
    only = {int(i) for i in args.only.split(",")} if args.only else None
    previous = json.loads(args.out.read_text()) if args.out.exists() else None
    result = run_ladder(ladder, work_dir=args.work_dir, only=only, previous=previous,
                        save=lambda r: args.out.write_text(json.dumps(r, indent=1)))
    for run in result["runs"]:
        decode = next((m for m in run.get("result", {}).get("measurements", []) if m["metric"] == contract.DECODE_TOK_S), None)
        figure = f"{decode['value']:.1f} tok/s" if decode else run.get("error", "").splitlines()[0][:100]
        print(f"{run['variant']['name']:<40} {run['state']:<10} {figure}")
    return 0 if all(r["state"] == "SUCCEEDED" for r in result["runs"]) else 1
