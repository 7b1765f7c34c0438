"""Allreduce latency sweep with torch.distributed, like nccl-tests' all_reduce_perf.

    python -m runners comm --backend nccl --world-size 2 --hidden-size 6144 --dtype bf16 \\
        --protos default,LL,LL128,Simple --json

The command spawns `--world-size` processes itself (torch.multiprocessing, start method
"spawn", rendezvous on 127.0.0.1 and a free port), one per GPU with NCCL, or CPU processes
with gloo. Each NCCL protocol (NCCL_PROTO) is read once, when NCCL initialises its
communicator, so every protocol gets its own fresh set of processes with NCCL_PROTO set
before init_process_group; "default" leaves NCCL_PROTO unset (NCCL chooses per size).
Other NCCL_* variables of the caller's environment pass through unchanged (on the shared
H200 hosts, NCCL_NVLS_ENABLE=0 must stay) and are recorded in the JSON.

Sizes: `--sizes 12K,1M,...` (bytes; K/M/G are powers of 1024), or the decode sizes of a
model: hidden_size x dtype bytes x batch, doubling up to --max-bytes (default 16M). A
decode step of one request allreduces hidden_size elements, so the first size is the one
a TP decode step pays for (hidden 6144 bf16 -> 12 KiB, the DESIGN's reference point).

Timing, per size, after `--warmup` untimed calls and a check that the sum is right:
- eager: one dist.all_reduce per iteration on an idle device; on CUDA, the time between
  CUDA events recorded on the current stream just before and just after the call (the
  device is synchronised between iterations), so it includes the host-side launch cost
  of ProcessGroupNCCL as an eager decode step pays it; on CPU, perf_counter around the
  blocking call. Median of `--iters`.
- graph (CUDA only): `--graph-calls` K allreduces captured in one CUDA graph; each replay
  is timed with CUDA events and divided by K; median of `--iters` replays. This is the
  cost inside a CUDA-graph decode step, launch overhead removed.
Ranks: each rank takes its own median; `us` is the slowest rank's median (nccl-tests
reports the slowest rank too), `us_by_rank` lists all. An allreduce's time includes
waiting for the last rank to arrive, so skew between ranks shows up here as in a model.
Bandwidth as nccl-tests defines it: algbw = bytes / time, busbw = algbw x 2(n-1)/n
(GB/s, 1 GB = 1e9 bytes). At decode sizes (KBs) these are latency-bound and tiny;
they matter for the health check at MBs.

CPU: gloo, no CUDA graphs (the graph rows are skipped with a note); bf16 is used when
gloo can allreduce it, otherwise float32 at the same byte sizes, with a note.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from runners.analysis import stats
from runners.engine import free_port

PROTOS = {"default": "default", "ll": "LL", "ll128": "LL128", "simple": "Simple"}
# Not an NCCL_PROTO: vLLM's own custom allreduce kernel (interleaved mode only; needs vLLM on the host).
CUSTOM = "custom"
DTYPES = {  # name -> (torch dtype attribute, bytes per element)
    "bf16": ("bfloat16", 2), "bfloat16": ("bfloat16", 2),
    "fp16": ("float16", 2), "float16": ("float16", 2), "half": ("float16", 2),
    "fp32": ("float32", 4), "float32": ("float32", 4), "float": ("float32", 4),
}
DTYPE_SHORT = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


class CommError(ValueError):
    """A bad argument or an unusable host; the message says which."""


# ---------------------------------------------------------------- argument helpers

def parse_bytes(text: str) -> int:
    """'12288' -> 12288, '12K' -> 12288, '16M' -> 16777216 (K/M/G are powers of 1024)."""
    s = str(text).strip().upper()
    num = s.rstrip("KMGIB")
    unit = s[len(num):]
    if unit not in _UNITS or not num:
        raise CommError(f"bad size {text!r}: give bytes, optionally with K, M or G (powers of 1024)")
    try:
        value = float(num)
    except ValueError:
        raise CommError(f"bad size {text!r}: give bytes, optionally with K, M or G") from None
    n = value * _UNITS[unit]
    if not math.isfinite(n) or n <= 0 or n != int(n):
        raise CommError(f"bad size {text!r}: must be a positive whole number of bytes")
    return int(n)


def parse_protos(text: str) -> list[str]:
    out = []
    for part in str(text).split(","):
        key = part.strip().lower()
        if not key:
            continue
        name = CUSTOM if key == CUSTOM else PROTOS.get(key)
        if name is None:
            raise CommError(f"unknown NCCL protocol {part.strip()!r}: choose from default, LL, LL128, Simple "
                            "(or custom, vLLM's custom allreduce, in --mode interleaved)")
        if name not in out:
            out.append(name)
    if not out:
        raise CommError("no protocol given: choose from default, LL, LL128, Simple")
    return out


def dtype_info(name: str) -> tuple[str, int]:
    key = str(name).strip().lower()
    if key not in DTYPES:
        raise CommError(f"unknown dtype {name!r}: choose from bf16, fp16, fp32")
    return DTYPES[key]


def sweep_sizes(*, hidden_size: int, elem_bytes: int, batch: int, max_bytes: int) -> list[int]:
    """hidden x dtype bytes x batch, doubling while <= max_bytes."""
    if hidden_size <= 0 or batch <= 0:
        raise CommError("--hidden-size and --batch must be positive")
    first = hidden_size * elem_bytes * batch
    if first > max_bytes:
        raise CommError(f"the first size {first} bytes is above --max-bytes {max_bytes}")
    sizes = []
    s = first
    while s <= max_bytes:
        sizes.append(s)
        s *= 2
    return sizes


def bandwidth_gbs(nbytes: int, us: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for NBYTES reduced in US microseconds (nccl-tests' definitions)."""
    algbw = nbytes / (us * 1e-6) / 1e9
    return algbw, algbw * busbw_factor(world_size)


def busbw_factor(world_size: int) -> float:
    return 2.0 * (world_size - 1) / world_size


def _fmt_bytes(n: int) -> str:
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


# ---------------------------------------------------------------- the worker (one per rank)

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


def _worker(rank: int, cfg: dict) -> None:
    import torch
    import torch.distributed as dist

    device, cuda = init_rank(rank, cfg)
    dtype = getattr(torch, cfg["dtype"])
    elem = torch.empty((), dtype=dtype).element_size()
    n = cfg["world_size"]
    results = []
    graph_error = None
    try:
        buf = torch.zeros(max(cfg["sizes"]) // elem, dtype=dtype, device=device)
        for nbytes in cfg["sizes"]:
            t = buf[: nbytes // elem]
            # Correctness first: every rank contributes rank+1, the sum is n(n+1)/2 everywhere.
            t.fill_(rank + 1)
            dist.all_reduce(t)
            if cuda:
                torch.cuda.synchronize()
            expected = n * (n + 1) / 2
            if not bool((t == expected).all()):
                raise RuntimeError(f"allreduce of {nbytes} bytes gave a wrong sum on rank {rank}")
            t.zero_()  # zeros: repeated in-place sums stay finite (the cost does not depend on values)
            for _ in range(cfg["warmup"]):
                dist.all_reduce(t)
            if cuda:
                torch.cuda.synchronize()
            dist.barrier()
            samples = []
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                for _ in range(cfg["iters"]):
                    start.record()
                    dist.all_reduce(t)
                    end.record()
                    end.synchronize()
                    samples.append(start.elapsed_time(end) * 1000.0)
            else:
                for _ in range(cfg["iters"]):
                    t0 = time.perf_counter()
                    dist.all_reduce(t)
                    samples.append((time.perf_counter() - t0) * 1e6)
            results.append({"mode": "eager", "bytes": nbytes, **_summary(samples)})

            if cuda and cfg["graph"] and graph_error is None:
                try:
                    results.append({"mode": "graph", "bytes": nbytes, **_graph_time(t, cfg)})
                except Exception as e:  # keep the eager figures; say why the graph rows are missing
                    graph_error = f"graph capture/replay failed at {nbytes} bytes: {type(e).__name__}: {e}"
                    results.append({"mode": "graph", "bytes": nbytes, "error": graph_error})
                    torch.cuda.synchronize()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(cfg["outdir"], f"rank{rank}.json").write_text(json.dumps(results))


def _graph_time(t, cfg: dict) -> dict:
    import torch
    import torch.distributed as dist

    k = cfg["graph_calls"]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch's graph docs ask
        for _ in range(3):
            dist.all_reduce(t)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # thread_local: ProcessGroupNCCL's watchdog thread may query events while we capture.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(k):
            dist.all_reduce(t)
    torch.cuda.synchronize()
    for _ in range(max(1, cfg["warmup"] // 2)):
        graph.replay()
    torch.cuda.synchronize()
    dist.barrier()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(cfg["iters"])]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(cfg["iters"])]
    for s, e in zip(starts, ends):
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) * 1000.0 / k for s, e in zip(starts, ends)]
    del graph
    return _summary(samples)


def _summary(samples: list[float]) -> dict:
    return {"us": stats.median(samples), "us_min": min(samples), "us_p90": stats.percentile(samples, 90)}


# ---------------------------------------------------------------- the parent

def _gloo_supports(dtype_name: str) -> bool:
    """Whether gloo allreduces this dtype: a one-rank group in a child process (keeps the parent clean)."""
    import subprocess
    code = (
        "import sys, torch, torch.distributed as d\n"
        "d.init_process_group('gloo', store=d.HashStore(), rank=0, world_size=1)\n"
        f"t = torch.ones(8, dtype=torch.{dtype_name}); d.all_reduce(t)\n"
        "sys.exit(0 if bool((t == 1).all()) else 1)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


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


def run_ranks(cfg: dict, timeout_s: float, target=None) -> list:
    """Spawn cfg["world_size"] ranks running TARGET(rank, cfg) (default: the sweep's worker);
    each writes rank<N>.json into cfg["outdir"]; returns their documents in rank order."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="comm-probe-") as outdir, _children_allowed():
        cfg = dict(cfg, outdir=outdir, port=free_port())
        # CPU (gloo) ranks fork: they skip re-importing torch (seconds per rank on a busy host), and
        # torch makes a forked child's intra-op pool single-threaded. CUDA ranks must spawn.
        method = "fork" if cfg["backend"] == "gloo" else "spawn"
        ctx = mp.start_processes(target or _worker, args=(cfg,), nprocs=cfg["world_size"], join=False,
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


def run_sweep(*, backend: str = "auto", world_size: int | None = None, sizes: list[int] | None = None,
              hidden_size: int = 4096, dtype: str = "bf16", batch: int = 1, max_bytes: int = 16 << 20,
              protos: list[str] | None = None, iters: int = 100, warmup: int = 10, graph: bool = True,
              graph_calls: int = 20, timeout_s: float = 600.0) -> dict:
    """Run the sweep and return the JSON document (see the module docstring)."""
    import torch

    protos = protos or ["default"]
    if CUSTOM in protos:
        raise CommError("vLLM's custom allreduce is timed in --mode interleaved only")
    if iters < 1 or warmup < 0 or graph_calls < 1:
        raise CommError("--iters and --graph-calls must be at least 1, --warmup at least 0")
    backend, world_size = resolve_backend(backend, world_size, protos)

    dtype_name, elem = dtype_info(dtype)
    if sizes is None:
        sizes = sweep_sizes(hidden_size=hidden_size, elem_bytes=elem, batch=batch, max_bytes=max_bytes)
    sizes = sorted(set(sizes))

    def check_sizes():
        bad = [s for s in sizes if s <= 0 or s % elem]
        if bad:
            raise CommError(f"sizes {bad} are not positive multiples of the {elem}-byte {dtype_name} element")

    check_sizes()
    notes = []
    if backend == "gloo" and dtype_name != "float32" and not _gloo_supports(dtype_name):
        notes.append(f"gloo in torch {torch.__version__} cannot allreduce {dtype_name}: float32 used "
                     "at the same byte sizes")
        dtype_name, elem = "float32", 4
        check_sizes()
    do_graph = graph and backend == "nccl"
    if graph and not do_graph:
        notes.append("graph mode skipped: CUDA graphs need CUDA (gloo runs on CPU)")

    factor = busbw_factor(world_size)
    results = []
    started = time.monotonic()
    for proto in protos:
        cfg = {"backend": backend, "world_size": world_size, "proto": proto, "sizes": sizes,
               "dtype": dtype_name, "iters": iters, "warmup": warmup, "graph": do_graph,
               "graph_calls": graph_calls, "timeout_s": timeout_s}
        try:
            per_rank = run_ranks(cfg, timeout_s)
        except Exception as e:  # one protocol's failure (a hang, a crash) must not lose the others
            message = str(e).strip()
            notes.append(f"proto {proto} failed: {type(e).__name__}: {message[-2000:]}")
            continue
        for i, row in enumerate(per_rank[0]):
            rows = [r[i] for r in per_rank]
            errors = sorted({r["error"] for r in rows if "error" in r})
            if errors:
                notes.extend(f"proto {proto}: {e}" for e in errors)
                continue
            us_by_rank = [r["us"] for r in rows]
            us = max(us_by_rank)
            algbw, busbw = bandwidth_gbs(row["bytes"], us, world_size)
            results.append({
                "proto": proto, "mode": row["mode"], "bytes": row["bytes"],
                "dtype": DTYPE_SHORT[dtype_name], "us": round(us, 3),
                "us_by_rank": [round(x, 3) for x in us_by_rank],
                "us_min": round(min(r["us_min"] for r in rows), 3),
                "us_p90": round(max(r["us_p90"] for r in rows), 3),
                "algbw_gbs": round(algbw, 4), "busbw_gbs": round(busbw, 4),
            })
    doc = host_facts(backend, world_size)
    doc.update({
        "dtype": DTYPE_SHORT[dtype_name],
        "sizes": sizes,
        "protos": protos,
        "iters": iters, "warmup": warmup,
        "graph_calls": graph_calls if do_graph else None,
        "us_is": "median per call of the slowest rank (max over ranks of each rank's median)",
        "busbw_factor": factor,
        "env": nccl_env(),
        "notes": notes,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results": results,
    })
    return doc


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


def format_table(doc: dict) -> str:
    head = (f"allreduce, {doc['backend']}, {doc['world_size']} x {doc['device']}, torch {doc['torch']}"
            + (f", NCCL {doc['nccl_version']}" if doc.get("nccl_version") else ""))
    lines = [head, f"{'proto':8} {'mode':6} {'bytes':>8} {'us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}"]
    for r in doc["results"]:
        lines.append(f"{r['proto']:8} {r['mode']:6} {_fmt_bytes(r['bytes']):>8} {r['us']:>10.2f} "
                     f"{r['algbw_gbs']:>11.3f} {r['busbw_gbs']:>11.3f}")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def add_arguments(parser):
    parser.add_argument("--mode", default="sweep", choices=["sweep", "interleaved"],
                        help="sweep: allreduces alone, per size (default); interleaved: the marginal cost of "
                             "an allreduce inside a proxy decode step (see runners/probes/comm_interleaved.py)")
    parser.add_argument("--backend", default="auto", choices=["nccl", "gloo", "auto"],
                        help="auto: nccl when enough GPUs are visible, else gloo on CPU")
    parser.add_argument("--world-size", type=int, default=None,
                        help="ranks (one process each); default: all GPUs with nccl, 2 with gloo")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated byte sizes (K/M/G = 1024^n), instead of --hidden-size")
    parser.add_argument("--hidden-size", type=int, default=4096, help="model hidden size (default 4096)")
    parser.add_argument("--dtype", default="bf16", help="bf16 (default), fp16 or fp32")
    parser.add_argument("--batch", type=int, default=1, help="tokens per decode step (default 1)")
    parser.add_argument("--max-bytes", default="16M", help="largest size of the sweep (default 16M)")
    parser.add_argument("--protos", default="default",
                        help="comma-separated NCCL_PROTO values: default, LL, LL128, Simple")
    parser.add_argument("--iters", type=int, default=100, help="timed calls (replays in graph mode)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls before timing")
    parser.add_argument("--graph", action=argparse.BooleanOptionalAction, default=True,
                        help="also time allreduces captured in a CUDA graph (CUDA only; default on)")
    parser.add_argument("--graph-calls", type=int, default=20, help="allreduces captured per graph")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="limit per protocol's processes")
    parser.add_argument("--layers", type=int, default=None,
                        help="interleaved: layers of the proxy step (default: the model config's depth, else 8)")
    parser.add_argument("--gemv-mb", default=None,
                        help="interleaved: comma-separated MiB of weights per GEMV block per GPU, one allreduce "
                             "each (e.g. 144,144 for two 6144 x 6144 pairs in bf16)")
    parser.add_argument("--model-config", default=None,
                        help="interleaved: a config.json (or its directory) giving the hidden size and the "
                             "attention and MLP blocks per GPU, instead of --hidden-size and --gemv-mb")
    parser.add_argument("--norm", choices=["fused", "ops"], default="fused",
                        help="interleaved: the proxy's RMSNorm after each allreduce: one kernel, as vLLM's "
                             "fused_add_rms_norm (default), or separate torch ops, as a step written in plain "
                             "PyTorch (benchmarks/gpu/synthetic_step.py --norm ops)")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--output", default=None, help="also write the JSON document to this file")


def parse_gemv_mb(text: str) -> list[int]:
    """'144,144' -> bytes per block (MiB, powers of 1024), each positive."""
    out = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        try:
            mib = float(part)
        except ValueError:
            raise CommError(f"bad --gemv-mb entry {part.strip()!r}: give MiB per block, e.g. 144,144") from None
        if not math.isfinite(mib) or mib <= 0:
            raise CommError(f"bad --gemv-mb entry {part.strip()!r}: must be a positive number of MiB")
        out.append(int(mib * (1 << 20)))
    if not out:
        raise CommError("--gemv-mb is empty")
    return out


def _interleaved_doc(args) -> dict:
    from runners.probes.comm_interleaved import load_config, run_interleaved

    if args.sizes is not None:
        raise CommError("--sizes belongs to the sweep; the interleaved mode allreduces the hidden state")
    config = load_config(args.model_config) if args.model_config else None
    if config is None and args.gemv_mb is None:
        raise CommError("--mode interleaved needs --gemv-mb or --model-config")
    return run_interleaved(backend=args.backend, world_size=args.world_size, hidden_size=args.hidden_size,
                           gemv_bytes=parse_gemv_mb(args.gemv_mb) if config is None else None,
                           model_config=config, layers=args.layers, dtype=args.dtype, batch=args.batch,
                           protos=parse_protos(args.protos), iters=args.iters, warmup=args.warmup,
                           graph=args.graph, norm=args.norm, timeout_s=args.timeout_s)


def main(args) -> int:
    try:
        if args.mode == "interleaved":
            from runners.probes.comm_interleaved import format_table as format_interleaved
            doc = _interleaved_doc(args)
            return _emit(doc, args, format_interleaved)
        sizes = None
        if args.sizes is not None:
            sizes = [parse_bytes(p) for p in args.sizes.split(",") if p.strip()]
            if not sizes:
                raise CommError("--sizes is empty")
        doc = run_sweep(backend=args.backend, world_size=args.world_size, sizes=sizes,
                        hidden_size=args.hidden_size, dtype=args.dtype, batch=args.batch,
                        max_bytes=parse_bytes(args.max_bytes), protos=parse_protos(args.protos),
                        iters=args.iters, warmup=args.warmup, graph=args.graph,
                        graph_calls=args.graph_calls, timeout_s=args.timeout_s)
    except CommError as e:
        print(f"comm: error: {e}", file=sys.stderr)
        return 2
    return _emit(doc, args, format_table)


def _emit(doc: dict, args, formatter) -> int:
    text = json.dumps(doc, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text if args.json else formatter(doc))
    failed = [n for n in doc["notes"] if " failed" in n]
    for n in failed:
        print(f"comm: {n}", file=sys.stderr)
    return 1 if failed else 0
