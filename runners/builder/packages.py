"""The extra packages a benchmark names (a loader plugin such as vllm-gguf-plugin), installed
from the worker's own wheelhouse into a folder the engine gets on its PYTHONPATH, cached like
builds (GPU hosts have no internet: BENCH_WHEELHOUSE is a folder of wheels on the host).

    site = install_packages(["vllm-gguf-plugin==0.0.5"], wheelhouse=Path("/opt/wheels"),
                            cache=BuildCache(...), log=[])       # BuildFailure with pip's words

`pip install --no-index --find-links WHEELHOUSE --no-deps --target DIR`: nothing is fetched, and
the engine's own packages (vllm, torch) are never replaced; a package's dependencies must be
named too. Also: a model in GGUF format needs a GGUF loader plugin before the engine starts.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .cache import BuildCache
from .errors import BuildFailure

PIP_TIMEOUT_S = 600
GGUF_PLUGIN = ("vllm.general_plugins", "gguf")  # the entry point vllm-gguf-plugin registers


def _wheels(wheelhouse: Path) -> list[str]:
    return sorted(f"{p.name}:{p.stat().st_size}" for p in wheelhouse.glob("*.whl"))


def packages_key(requirements: list[str], wheelhouse: Path) -> str:
    """The cache key: the requirements, the wheelhouse's wheels and this Python."""
    text = json.dumps({"packages": sorted(requirements), "wheels": _wheels(wheelhouse),
                       "python": sys.version_info[:2]}, sort_keys=True)
    return "packages-" + hashlib.sha256(text.encode()).hexdigest()


def install_packages(requirements: list[str], *, wheelhouse: Path | None, cache: BuildCache,
                     log: list[str]) -> Path:
    """The folder holding REQUIREMENTS (validated by contract.check_packages), built once."""
    if wheelhouse is None or not Path(wheelhouse).is_dir():
        raise BuildFailure(f"the benchmark needs the packages {', '.join(requirements)} and this worker has no "
                           "wheelhouse to install them from: set BENCH_WHEELHOUSE to a folder of wheels")
    key = packages_key(requirements, Path(wheelhouse))
    hit = cache.get(key)
    if hit:
        log.append(f"packages cache hit {key[9:25]}: {', '.join(requirements)}")
        return Path(hit["dir"]) / "site"

    def build(tmp: Path) -> dict:
        argv = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse), "--no-deps",
                "--disable-pip-version-check", "--no-input", "--target", str(tmp / "site"), *requirements]
        log.append("installing packages: " + " ".join(argv[3:]))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BuildFailure(f"installing {', '.join(requirements)} took over {PIP_TIMEOUT_S} s") from None
        log.extend((done.stdout + done.stderr).splitlines()[-40:])
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()
            raise BuildFailure(f"cannot install {', '.join(requirements)} from the wheelhouse {wheelhouse}: "
                               + (" ".join(lines[-2:]) or f"pip exited {done.returncode}"))
        return {"path": "packages", "packages": requirements}

    log.append(f"packages cache miss {key[9:25]}")
    record = cache.put(key, build)
    return Path(record["dir"]) / "site"


def is_gguf(model: str) -> bool:
    return model.lower().endswith(".gguf")


def has_entry_point(group: str, name: str, paths: list[str]) -> bool:
    """Whether a distribution on PATHS (then this interpreter's sys.path) registers GROUP/NAME."""
    for dist in metadata.distributions(path=[*paths, *sys.path]):
        if any(ep.group == group and ep.name == name for ep in dist.entry_points):
            return True
    return False


def check_gguf_loader(model: str, paths: list[str]) -> None:
    """BuildFailure when MODEL is a GGUF file and no GGUF loader plugin is on the engine's path
    (vLLM itself has none since 0.24): a clear refusal before the engine starts."""
    if is_gguf(model) and not has_entry_point(*GGUF_PLUGIN, paths):
        raise BuildFailure(f"the model {model} is a GGUF file and this worker has no GGUF loader: vLLM reads GGUF "
                           "only through vllm-gguf-plugin; name it in the benchmark's packages "
                           "(e.g. vllm-gguf-plugin==0.0.5, with gguf) and put its wheels in BENCH_WHEELHOUSE")
