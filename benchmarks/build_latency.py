"""Time from delivery (a job spec received by the worker) to `vllm serve` being started, for
the Python-only path (a commit laid over the installed vLLM), with a cold and a warm build cache.

    python benchmarks/build_latency.py [--json]

A bare repository is made here from the installed vllm package's Python files (tagged as the
worker's base, v0.32.0) and one Python-only commit is pushed to it. Each case parses the spec,
builds (or reuses) the engine through runners.builder.prepare, then starts `vllm serve --help`
under the overlay's PYTHONPATH: the same interpreter start and `import vllm` a real start pays,
without loading a model. Queue wait is excluded. Target: warm under 15 s.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runners.builder.config import BuildConfig
from runners.builder.overlay import overlay_env
from runners.builder.prepare import prepare_engine
from runners.contract import JobSpec

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


def make_remote(root: Path) -> tuple[str, str]:
    """(file:// URL, SHA of a Python-only commit on main) of a bare repo of the installed vllm."""
    src = Path(list(importlib.util.find_spec("vllm").submodule_search_locations)[0])
    bare, work = root / "remote.git", root / "work"
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    git(root, "init", "--quiet", "--initial-branch=main", str(work))
    for py in src.rglob("*.py"):
        dest = work / "vllm" / py.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(py, dest)
    git(work, "add", "--all")
    git(work, "commit", "--quiet", "-m", "base")
    git(work, "tag", "v0.32.0")
    logger = work / "vllm" / "logger.py"
    logger.write_text(logger.read_text() + "\nBENCH_LATENCY_MARK = 1\n")
    git(work, "commit", "--quiet", "-am", "python only")
    git(work, "push", "--quiet", str(bare), "main", "v0.32.0")
    return f"file://{bare}", git(work, "rev-parse", "HEAD")


def vllm_command() -> list[str]:
    exe = Path(sys.executable).with_name("vllm")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "vllm.entrypoints.cli.main"]


def one_case(name: str, spec: dict, config: BuildConfig) -> dict:
    t0 = time.monotonic()
    prepared = prepare_engine(JobSpec.from_dict(json.loads(json.dumps(spec))), config)
    t_built = time.monotonic()
    env = {**os.environ, **(overlay_env(Path(prepared.pythonpath)) if prepared.pythonpath else {})}
    subprocess.run([*vllm_command(), "serve", "--help"], env=env, check=True, capture_output=True, timeout=300)
    t_serve = time.monotonic()
    return {"case": name, "path": prepared.info["path"], "cache_hit": prepared.info.get("cache_hit"),
            "build_s": round(t_built - t0, 2), "serve_started_s": round(t_serve - t_built, 2),
            "delivery_to_serve_s": round(t_serve - t0, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="build-latency-") as tmp:
        root = Path(tmp)
        url, sha = make_remote(root)
        config = BuildConfig(cache_dir=root / "cache", base_ref="v0.32.0", allow_file_urls=True)
        base = {"model": "m", "prompt": "p", "max_tokens": 8, "repeats": 1}
        pushed = {**base, "engine": {"kind": "git", "repo": url, "ref": "main", "commit": sha}}
        by_branch = {**base, "engine": {"kind": "git", "repo": url, "ref": "main"}}
        rows = [one_case("cold (clone + overlay)", pushed, config),
                one_case("warm, push with SHA", pushed, config),
                one_case("warm, branch ref (fetch)", by_branch, config)]
    if args.json:
        print(json.dumps({"target_warm_s": 15, "rows": rows}, indent=1))
    else:
        print(f"{'case':28} {'path':8} {'hit':5} {'build s':>8} {'serve s':>8} {'total s':>8}")
        for r in rows:
            print(f"{r['case']:28} {r['path']:8} {str(r['cache_hit']):5} {r['build_s']:8.2f} "
                  f"{r['serve_started_s']:8.2f} {r['delivery_to_serve_s']:8.2f}")
        print("target: warm under 15 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
