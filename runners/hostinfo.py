"""What machine a run ran on: GPU model and count, driver, CPU model (the host fingerprint that
verdicts compare within), plus the host name and its software. The one report of a host: every
job's result carries it (contract.HostInfo), from the GPU worker and the offline ladder alike.
Gathered on the GPU side, plain Python.

    host_info()        # {"hostname": "gpu-7", "gpu_model": "NVIDIA H200", "gpu_count": 8,
                       #  "driver": "550.54.15", "cpu_model": "AMD EPYC 9654 96-Core Processor",
                       #  "platform": "Linux-...", "python": "3.11.7", "torch": "2.5.1"}
    fingerprint(info)  # "8x NVIDIA H200, driver 550.54.15, AMD EPYC 9654 96-Core Processor"

nvidia-smi first (it knows the driver); torch.cuda when there is no nvidia-smi but torch sees
GPUs (the driver is then unknown, ""); a host with neither has gpu_count 0.
"""
from __future__ import annotations

import functools
import shutil
import socket
import subprocess
from pathlib import Path

from .contract import host_fingerprint

NVIDIA_SMI_TIMEOUT_S = 15


def parse_nvidia_smi(text: str) -> tuple[str, int, str]:
    """(model, count, driver) from `nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`.
    Mixed models are joined with ' + ' so that they never look like a uniform host."""
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) >= 2]
    models = sorted({r[0] for r in rows})
    drivers = sorted({r[1] for r in rows})
    return " + ".join(models), len(rows), " + ".join(drivers)


def parse_cpuinfo(text: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model name"):  # x86 / some arm kernels
            return " ".join(value.split())
    return ""


def _nvidia_smi() -> tuple[str, int, str] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else None


def _torch_cuda() -> tuple[str, int, str] | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    models = sorted({torch.cuda.get_device_name(i) for i in range(count)})
    return " + ".join(models), count, ""


@functools.lru_cache(maxsize=1)
def host_info() -> dict:
    """This host's fingerprint fields and name (cached: a host does not change under a worker)."""
    gpus = _nvidia_smi() or _torch_cuda() or ("", 0, "")
    try:
        cpu = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        cpu = ""
    if not cpu:
        import platform
        cpu = platform.processor() or platform.machine()
    return {"hostname": socket.gethostname(), "gpu_model": gpus[0], "gpu_count": gpus[1], "driver": gpus[2],
            "cpu_model": cpu, **_software()}


def _software() -> dict:
    """What the host runs beside its fingerprint (not part of it): platform, Python, torch."""
    import platform
    from importlib import metadata

    info = {"platform": platform.platform(), "python": platform.python_version()}
    try:
        info["torch"] = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pass
    return info


def fingerprint(info: dict) -> str:
    """The readable fingerprint (contract.host_fingerprint): runs with equal fingerprints are comparable machines."""
    return host_fingerprint(info)


def host_queue(pool_queue: str, hostname: str) -> str:
    """The queue only HOSTNAME's GPU worker of a pool consumes (besides the pool's own)."""
    return f"{pool_queue}.host.{hostname}"
