"""The comm probe's processes: one per rank, joined in a torch.distributed group on 127.0.0.1.

`run_ranks(cfg, timeout_s, target)` starts cfg["world_size"] processes running
target(rank, cfg) (fork for gloo on CPU, spawn for CUDA), each of which calls `init_rank`
first and writes rank<N>.json into cfg["outdir"]. Each NCCL protocol (NCCL_PROTO) is read
once, when NCCL initialises its communicator, so every protocol gets its own fresh set of
processes with NCCL_PROTO set before init_process_group; "default" leaves NCCL_PROTO unset
(NCCL chooses per size). Other NCCL_* variables of the caller's environment pass through
unchanged and are recorded in the result (`nccl_env`).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import tempfile
import time
from pathlib import Path

from runners.engine import free_port

from .options import CUSTOM, CommError


def init_rank(rank: int, cfg: dict):
    """Join the process group as RANK, with NCCL_PROTO set first; returns (device, cuda)."""
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(cfg["port"])
    os.environ["RANK"] = str(rank)
    os.environ["WORLD_SIZE"] = str(cfg["world_size"])
    proto = cfg["proto"]
    if cfg["backend"] == "nccl":
        if proto in ("default", CUSTOM):
            os.environ.pop("NCCL_PROTO", None)
        else:
            os.environ["NCCL_PROTO"] = proto  # before the communicator exists: NCCL reads it at init
    cuda = cfg["backend"] == "nccl"
    timeout = _dt.timedelta(seconds=cfg["timeout_s"])
    if cuda:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        # device_id makes NCCL create its communicator now (eager init), with our NCCL_PROTO.
        dist.init_process_group("nccl", init_method="env://", rank=rank, world_size=cfg["world_size"],
                                timeout=timeout, device_id=device)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=cfg["world_size"],
                                timeout=timeout)
    return device, cuda


@contextlib.contextmanager
def _children_allowed():
    """A Celery prefork worker's child is daemonic, and multiprocessing refuses a daemonic
    process children ("daemonic processes are not allowed to have children": every comm probe
    of the first GPU run through the service). run_ranks joins or kills its ranks itself, so
    the flag is lifted while they run and put back after."""
    import multiprocessing

    config = multiprocessing.current_process()._config  # the flag start() checks; no public setter in a child
    daemon = config.get("daemon")
    config["daemon"] = False
    try:
        yield
    finally:
        if daemon is not None:
            config["daemon"] = daemon


def run_ranks(cfg: dict, timeout_s: float, target) -> list:
    """Spawn cfg["world_size"] ranks running TARGET(rank, cfg); each writes rank<N>.json into
    cfg["outdir"]; returns their documents in rank order."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="comm-probe-") as outdir, _children_allowed():
        cfg = dict(cfg, outdir=outdir, port=free_port())
        # CPU (gloo) ranks fork: they skip re-importing torch (seconds per rank on a busy host), and
        # torch makes a forked child's intra-op pool single-threaded. CUDA ranks must spawn.
        method = "fork" if cfg["backend"] == "gloo" else "spawn"
        ctx = mp.start_processes(target, args=(cfg,), nprocs=cfg["world_size"], join=False,
                                 start_method=method)
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.terminate()
                for p in ctx.processes:
                    p.join(10)
                files = [Path(outdir, f"rank{r}.json") for r in range(cfg["world_size"])]
                if all(f.exists() for f in files):  # figures complete; only the teardown hung
                    return [json.loads(f.read_text()) for f in files]
                raise RuntimeError(f"proto {cfg['proto']}: the ranks did not finish within {timeout_s:.0f} s")
        return [json.loads(Path(outdir, f"rank{r}.json").read_text()) for r in range(cfg["world_size"])]


def resolve_backend(backend: str, world_size: int | None, protos: list[str]) -> tuple[str, int]:
    """('auto' | 'nccl' | 'gloo', ranks or None) -> the backend and world size to use, or CommError."""
    import torch
    import torch.distributed as dist

    if backend not in ("auto", "nccl", "gloo"):
        raise CommError(f"unknown backend {backend!r}: choose nccl, gloo or auto")
    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        backend = "nccl" if cuda_count >= max(2, world_size or 2) and dist.is_nccl_available() else "gloo"
    if world_size is None:
        world_size = cuda_count if backend == "nccl" else 2
    if world_size < 2:
        raise CommError(f"--world-size must be at least 2 (got {world_size}): one rank moves no data")
    if backend == "nccl":
        if not dist.is_nccl_available():
            raise CommError("this torch has no NCCL; use --backend gloo")
        if cuda_count < world_size:
            raise CommError(f"--world-size {world_size} needs {world_size} GPUs, this host has {cuda_count}")
    elif CUSTOM in protos:
        raise CommError("vLLM's custom allreduce needs CUDA GPUs (--backend nccl)")
    elif protos != ["default"]:
        raise CommError(f"NCCL_PROTO ({','.join(protos)}) applies to NCCL only; with gloo use --protos default")
    return backend, world_size


def host_facts(backend: str, world_size: int) -> dict:
    """The head of a result document: what ran where, and when."""
    import torch

    doc = {
        "backend": backend,
        "world_size": world_size,
        "device": (torch.cuda.get_device_name(0) if backend == "nccl" else "cpu"),
        "torch": torch.__version__,
    }
    if backend == "nccl":
        v = torch.cuda.nccl.version()
        doc["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        doc["cuda"] = torch.version.cuda
    doc["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    doc["host"] = socket.gethostname()
    return doc


def nccl_env() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_NCCL"))}
