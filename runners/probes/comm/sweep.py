"""Allreduce latency sweep with torch.distributed, like nccl-tests' all_reduce_perf.

    python -m runners comm --backend nccl --world-size 2 --hidden-size 6144 --dtype bf16 \\
        --protos default,LL,LL128,Simple --json

The command spawns `--world-size` processes itself (ranks.py: torch.multiprocessing,
rendezvous on 127.0.0.1 and a free port), one per GPU with NCCL, or CPU processes with gloo,
a fresh set per NCCL protocol. Other NCCL_* variables of the caller's environment pass
through unchanged (on the shared H200 hosts, NCCL_NVLS_ENABLE=0 must stay) and are recorded
in the JSON.

Sizes: `--sizes 12K,1M,...` (bytes; K/M/G are powers of 1024), or the decode sizes of a
model: hidden_size x dtype bytes x batch, doubling up to --max-bytes (default 16M). A
decode step of one request allreduces hidden_size elements, so the first size is the one
a TP decode step pays for (hidden 6144 bf16 -> 12 KiB, docs/reference-figures.md).

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

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from runners.analysis import stats

from .options import CUSTOM, DTYPE_SHORT, CommError, dtype_info
from .ranks import host_facts, init_rank, nccl_env, resolve_backend, run_ranks


# ---------------------------------------------------------------- arithmetic

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

def _worker(rank: int, cfg: dict) -> None:
    import torch
    import torch.distributed as dist

    device, cuda = init_rank(rank, cfg)
    dtype = getattr(torch, cfg["dtype"])
    elem = torch.empty((), dtype=dtype).element_size()
    results = []
    graph_error = None
    try:
        buf = torch.zeros(max(cfg["sizes"]) // elem, dtype=dtype, device=device)
        for nbytes in cfg["sizes"]:
            t = buf[: nbytes // elem]
            _check_sum(t, rank, cfg["world_size"], cuda)
            results.append({"mode": "eager", "bytes": nbytes, **_eager_time(t, cfg, cuda)})
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


def _check_sum(t, rank: int, n: int, cuda: bool) -> None:
    """Correctness first: every rank contributes rank+1, the sum is n(n+1)/2 everywhere."""
    import torch
    import torch.distributed as dist

    t.fill_(rank + 1)
    dist.all_reduce(t)
    if cuda:
        torch.cuda.synchronize()
    expected = n * (n + 1) / 2
    if not bool((t == expected).all()):
        raise RuntimeError(f"allreduce of {t.numel() * t.element_size()} bytes gave a wrong sum on rank {rank}")
    t.zero_()  # zeros: repeated in-place sums stay finite (the cost does not depend on values)


def _eager_time(t, cfg: dict, cuda: bool) -> dict:
    import torch
    import torch.distributed as dist

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
    return _summary(samples)


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


@dataclass
class _Plan:
    """What a sweep runs: checked arguments, the sizes, and the notes on what was changed."""
    backend: str
    world_size: int
    sizes: list[int]
    dtype_name: str
    graph: bool
    notes: list[str]


def _check_sizes(sizes: list[int], elem: int, dtype_name: str) -> None:
    bad = [s for s in sizes if s <= 0 or s % elem]
    if bad:
        raise CommError(f"sizes {bad} are not positive multiples of the {elem}-byte {dtype_name} element")


def _plan(*, backend, world_size, sizes, hidden_size, dtype, batch, max_bytes, protos, iters, warmup, graph,
          graph_calls) -> _Plan:
    """Check the arguments and choose backend, world size, sizes and dtype (CommError when unusable)."""
    import torch

    if CUSTOM in protos:
        raise CommError("vLLM's custom allreduce is timed in --mode interleaved only")
    if iters < 1 or warmup < 0 or graph_calls < 1:
        raise CommError("--iters and --graph-calls must be at least 1, --warmup at least 0")
    backend, world_size = resolve_backend(backend, world_size, protos)
    dtype_name, elem = dtype_info(dtype)
    if sizes is None:
        sizes = sweep_sizes(hidden_size=hidden_size, elem_bytes=elem, batch=batch, max_bytes=max_bytes)
    sizes = sorted(set(sizes))
    _check_sizes(sizes, elem, dtype_name)
    notes = []
    if backend == "gloo" and dtype_name != "float32" and not _gloo_supports(dtype_name):
        notes.append(f"gloo in torch {torch.__version__} cannot allreduce {dtype_name}: float32 used "
                     "at the same byte sizes")
        dtype_name, elem = "float32", 4
        _check_sizes(sizes, elem, dtype_name)
    do_graph = graph and backend == "nccl"
    if graph and not do_graph:
        notes.append("graph mode skipped: CUDA graphs need CUDA (gloo runs on CPU)")
    return _Plan(backend, world_size, sizes, dtype_name, do_graph, notes)


def _proto_rows(proto: str, per_rank: list[list[dict]], plan: _Plan) -> tuple[list[dict], list[str]]:
    """One protocol's result rows from the ranks' documents (the slowest rank's median), and notes."""
    rows_out, notes = [], []
    for i, row in enumerate(per_rank[0]):
        rows = [r[i] for r in per_rank]
        errors = sorted({r["error"] for r in rows if "error" in r})
        if errors:
            notes.extend(f"proto {proto}: {e}" for e in errors)
            continue
        us_by_rank = [r["us"] for r in rows]
        us = max(us_by_rank)
        algbw, busbw = bandwidth_gbs(row["bytes"], us, plan.world_size)
        rows_out.append({
            "proto": proto, "mode": row["mode"], "bytes": row["bytes"],
            "dtype": DTYPE_SHORT[plan.dtype_name], "us": round(us, 3),
            "us_by_rank": [round(x, 3) for x in us_by_rank],
            "us_min": round(min(r["us_min"] for r in rows), 3),
            "us_p90": round(max(r["us_p90"] for r in rows), 3),
            "algbw_gbs": round(algbw, 4), "busbw_gbs": round(busbw, 4),
        })
    return rows_out, notes


def run_sweep(*, backend: str = "auto", world_size: int | None = None, sizes: list[int] | None = None,
              hidden_size: int = 4096, dtype: str = "bf16", batch: int = 1, max_bytes: int = 16 << 20,
              protos: list[str] | None = None, iters: int = 100, warmup: int = 10, graph: bool = True,
              graph_calls: int = 20, timeout_s: float = 600.0) -> dict:
    """Run the sweep and return the JSON document (see the module docstring)."""
    protos = protos or ["default"]
    plan = _plan(backend=backend, world_size=world_size, sizes=sizes, hidden_size=hidden_size, dtype=dtype,
                 batch=batch, max_bytes=max_bytes, protos=protos, iters=iters, warmup=warmup, graph=graph,
                 graph_calls=graph_calls)
    notes = plan.notes
    results = []
    started = time.monotonic()
    for proto in protos:
        cfg = {"backend": plan.backend, "world_size": plan.world_size, "proto": proto, "sizes": plan.sizes,
               "dtype": plan.dtype_name, "iters": iters, "warmup": warmup, "graph": plan.graph,
               "graph_calls": graph_calls, "timeout_s": timeout_s}
        try:
            per_rank = run_ranks(cfg, timeout_s, target=_worker)
        except Exception as e:  # one protocol's failure (a hang, a crash) must not lose the others
            message = str(e).strip()
            notes.append(f"proto {proto} failed: {type(e).__name__}: {message[-2000:]}")
            continue
        rows, row_notes = _proto_rows(proto, per_rank, plan)
        results += rows
        notes += row_notes
    doc = host_facts(plan.backend, plan.world_size)
    doc.update({
        "dtype": DTYPE_SHORT[plan.dtype_name],
        "sizes": plan.sizes,
        "protos": protos,
        "iters": iters, "warmup": warmup,
        "graph_calls": graph_calls if plan.graph else None,
        "us_is": "median per call of the slowest rank (max over ranks of each rank's median)",
        "busbw_factor": busbw_factor(plan.world_size),
        "env": nccl_env(),
        "notes": notes,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results": results,
    })
    return doc


def format_table(doc: dict) -> str:
    head = (f"allreduce, {doc['backend']}, {doc['world_size']} x {doc['device']}, torch {doc['torch']}"
            + (f", NCCL {doc['nccl_version']}" if doc.get("nccl_version") else ""))
    lines = [head, f"{'proto':8} {'mode':6} {'bytes':>8} {'us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}"]
    for r in doc["results"]:
        lines.append(f"{r['proto']:8} {r['mode']:6} {_fmt_bytes(r['bytes']):>8} {r['us']:>10.2f} "
                     f"{r['algbw_gbs']:>11.3f} {r['busbw_gbs']:>11.3f}")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)
