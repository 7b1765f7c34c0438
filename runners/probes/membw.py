"""Device memory bandwidth measured on the worker, for the "where the time goes" floor: time
a large device-to-device copy (CUDA when torch sees a GPU, else a host memcpy) instead of
trusting a datasheet. A copy of N bytes reads N and writes N: bandwidth = 2 N / time, the
convention of STREAM's copy and of `nvbandwidth`'s device-local copy.

Also the weight bytes each GPU reads per token: the model's weight files over the tensor
parallel size (every decode step reads every weight once; with TP each GPU holds 1/TP)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


GPU_BYTES = 1024 * 1024 * 1024  # well past any GPU's L2 (H200 at 1 GiB: 4.26 TB/s, 256 MiB: 4.18)
HOST_BYTES = 64 * 1024 * 1024  # past a CPU's L3, small enough for a loaded test host
# The device nodes a GPU runtime needs (NVIDIA's, AMD's KFD, WSL's): without one, torch.cuda cannot
# see a GPU, and importing torch only to hear so costs more CPU than the copy itself.
GPU_DEVICE_NODES = ("nvidiactl", "kfd", "dxg")


def gpu_device_node_present(dev: Path = Path("/dev")) -> bool:
    return any((dev / name).exists() for name in GPU_DEVICE_NODES)


def bandwidth_bytes_per_s(nbytes: int, iters: int, seconds: float) -> float:
    """Read + write bytes per second of ITERS copies of NBYTES taking SECONDS in all."""
    if nbytes <= 0 or iters <= 0 or seconds <= 0:
        raise ValueError(f"need positive bytes, iterations and time, not {nbytes}, {iters}, {seconds}")
    return 2.0 * nbytes * iters / seconds


def _cuda_copy_seconds(torch, nbytes: int, iters: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm up (allocation, first launch)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        dst.copy_(src)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1000.0
    del src, dst
    torch.cuda.empty_cache()
    return seconds


def _host_copy_seconds(nbytes: int, iters: int, clock: Callable[[], float]) -> float:
    import numpy as np

    src = np.ones(nbytes, dtype=np.uint8)  # touched: pages are mapped before the timing
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = float("inf")
    for _ in range(iters):  # the fastest copy: the others include other processes' interference
        t0 = clock()
        np.copyto(dst, src)
        best = min(best, clock() - t0)
    return best * iters


def copy_bandwidth(*, nbytes: int | None = None, iters: int = 20, device: str = "auto",
                   clock: Callable[[], float] = time.perf_counter) -> dict:
    """{"bytes_per_s", "device", "bytes", "iters", "seconds"}. DEVICE: "auto" (CUDA if torch
    has a GPU; torch is not imported where no GPU device node exists), "cuda" or "cpu"."""
    use_cuda = False
    if device == "cuda" or (device == "auto" and gpu_device_node_present()):
        try:
            import torch

            use_cuda = torch.cuda.is_available()
        except ImportError:
            use_cuda = False
        if device == "cuda" and not use_cuda:
            raise RuntimeError("copy bandwidth on CUDA asked for, but torch sees no GPU")
    nbytes = nbytes or (GPU_BYTES if use_cuda else HOST_BYTES)
    if use_cuda:
        seconds, where = _cuda_copy_seconds(torch, nbytes, iters), f"cuda:{torch.cuda.current_device()} " \
                                                                   f"{torch.cuda.get_device_name()}"
    else:
        seconds, where = _host_copy_seconds(nbytes, iters, clock), "cpu (host memcpy)"
    return {"bytes_per_s": bandwidth_bytes_per_s(nbytes, iters, seconds), "device": where, "bytes": nbytes,
            "iters": iters, "seconds": seconds}


def copy_bandwidth_isolated(*, timeout_s: float = 180.0) -> dict:
    """copy_bandwidth in a child process (`python -m runners.probes.membw`): its CUDA context and the
    copy's buffers are gone before the engine starts and asks for most of the GPU's memory."""
    out = subprocess.run([sys.executable, "-m", "runners.probes.membw"], capture_output=True, text=True,
                         timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"copy bandwidth probe exited {out.returncode}: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def weight_bytes_per_gpu(model: str | Path, tensor_parallel_size: int) -> int | None:
    """Bytes of the model directory's weight files over TP (safetensors when there are any:
    hub repositories often carry the same weights as .bin too); None when MODEL is not a local
    directory with weight files (a hub name: the worker cannot tell without downloading)."""
    root = Path(model)
    if not root.is_dir():
        return None
    files = [p for p in root.iterdir() if p.is_file()]
    weights = [p for p in files if p.suffix == ".safetensors"] or [p for p in files if p.suffix in (".bin", ".pt", ".pth")
                                                                   and not p.name.startswith("training_args")]
    total = sum(p.stat().st_size for p in weights)
    return total // max(1, int(tensor_parallel_size)) if total else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Device memory copy bandwidth (read + write bytes per second), as JSON.")
    parser.add_argument("--bytes", type=int, help="buffer size (default: 1 GiB on a GPU, 64 MiB on the host)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = parser.parse_args(argv)
    print(json.dumps(copy_bandwidth(nbytes=args.bytes, iters=args.iters, device=args.device)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
