"""`runners comm --mode interleaved`: what one allreduce costs inside a decode step.

    python -m runners comm --mode interleaved --backend nccl --world-size 2 --hidden-size 6144 \\
        --layers 8 --gemv-mb 144,144 --protos default,LL,LL128,Simple

An allreduce timed alone, back to back with others, is not what it costs in a model: there
it follows a GEMV that streamed the weights through the chip, the ranks arrive at different
times, and the next GEMV waits for it. So this mode builds a proxy decode step and measures
the difference an allreduce makes to it:

- per layer, per GEMV block (one per `--gemv-mb` entry, or per `--model-config` block): a
  column-parallel GEMV (hidden -> k) and a row-parallel one (k -> hidden) whose two weight
  matrices hold that block's bytes together, then an allreduce of the hidden state
  (hidden x dtype x batch bytes, the decode size), then the residual add and an RMSNorm in
  float32 (what vLLM's fused_add_rms_norm does; one kernel, `--norm fused`, the default, or
  separate torch ops, `--norm ops`, to predict a step written that way);
- the same step without the allreduces;
- marginal cost per allreduce = (step with - step without) / allreduces per step, where each
  step time is the slowest rank's median (the slower GPU sets the pace of a TP step).

On CUDA both steps are captured as CUDA graphs (as vLLM decodes) and their replays are
queued back to back, in alternating groups so that drift hits both alike; each replay is
timed with CUDA events. With `--no-graph` or on CPU (gloo), each step runs eagerly and is
timed on its own (CPU: perf_counter; float32, since the point there is the shape of the
output, not the figure).

`--model-config` takes a Hugging Face config.json (or its directory): the hidden size and
the two blocks of a Llama-style layer (attention: qkv + o; MLP: gate + up + down), divided
by the world size (the tensor-parallel degree), replace `--hidden-size` and `--gemv-mb`, and
its `num_hidden_layers` is the proxy's depth (`--layers` overrides it; 8 without a config).

The depth matters. An 8-layer proxy (2.4 GB of weights) predicted the marginal cost of a
78-layer step (23.6 GB) at +14% on one 2 x H200 host and -41% on another, while the step's own
A/B repeated within 2% (docs/methods/allreduce-calibration.md): what an allreduce costs
depends on how long the weight stream around it runs. So the proxy takes the model's depth,
capped at MAX_PROXY_WEIGHT_BYTES per GPU (it runs before the engine starts, on free GPUs).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from runners.analysis import stats

from .options import CUSTOM, DTYPE_SHORT, CommError, dtype_info
from .ranks import host_facts, init_rank, nccl_env, resolve_backend, run_ranks

MIB = 1 << 20
DEFAULT_LAYERS = 8  # without a model config
MAX_PROXY_WEIGHT_BYTES = 48 << 30  # per GPU: leaves an 80 GB GPU room for NCCL and the graphs
RMS_EPS = 1e-6
NORMS = ("fused", "ops")  # the RMSNorm after each allreduce: one kernel (vLLM) or torch ops


# ---------------------------------------------------------------- arithmetic (known answers in the tests)

def gemv_blocks_from_config(config: dict, *, tensor_parallel_size: int, elem_bytes: int) -> list[int]:
    """Weight bytes per GPU of a Llama-style layer's two blocks: [attention (q, k, v, o), MLP (gate, up, down)]."""
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        inter = int(config["intermediate_size"])
    except (KeyError, TypeError, ValueError) as e:
        raise CommError(f"model config lacks what a layer's size needs ({e}): hidden_size, "
                        "num_attention_heads, intermediate_size") from None
    if min(hidden, heads, kv_heads, head_dim, inter, tensor_parallel_size) <= 0:
        raise CommError("model config sizes and the tensor-parallel size must be positive")
    attention = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden
    mlp = 3 * hidden * inter
    return [attention * elem_bytes // tensor_parallel_size, mlp * elem_bytes // tensor_parallel_size]


def inner_dim(block_bytes: int, *, hidden_size: int, elem_bytes: int) -> int:
    """k such that the two matrices hidden x k and k x hidden hold BLOCK_BYTES (at least 1)."""
    return max(1, round(block_bytes / (2 * hidden_size * elem_bytes)))


def marginal_us(*, with_us_by_rank: list[float], without_us_by_rank: list[float], calls: int) -> float:
    """Per-allreduce cost: (slowest rank's step with - slowest rank's step without) / calls."""
    if calls < 1:
        raise ValueError("calls must be at least 1")
    return (max(with_us_by_rank) - max(without_us_by_rank)) / calls


def proxy_layers(*, requested: int | None, config: dict | None, block_bytes: list[int]) -> tuple[int, str]:
    """(depth of the proxy, a note or ''): `requested`, else the model's num_hidden_layers, else
    DEFAULT_LAYERS; never more than MAX_PROXY_WEIGHT_BYTES of weights per GPU."""
    if requested is not None:
        return requested, ""
    depth = int((config or {}).get("num_hidden_layers") or DEFAULT_LAYERS)
    fits = max(1, MAX_PROXY_WEIGHT_BYTES // max(1, sum(block_bytes)))
    if depth > fits:
        return fits, (f"proxy depth capped at {fits} of the model's {depth} layers "
                      f"({MAX_PROXY_WEIGHT_BYTES >> 30} GiB of weights per GPU)")
    return depth, ""


def load_config(path: str) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise CommError(f"cannot read model config {path!r}: {e}") from None


# ---------------------------------------------------------------- one rank

def _worker(rank: int, cfg: dict) -> None:
    import torch
    import torch.distributed as dist

    device, cuda = init_rank(rank, cfg)
    try:
        if not cuda:
            torch.set_num_threads(1)
        allreduce, capture = _allreduce_op(cfg, device)
        step = _build_step(rank, cfg, device, allreduce)
        _check(step, cfg)
        if cuda and cfg["graph"]:
            with_us, without_us = _time_graphs(step, cfg, capture)
        else:
            with_us, without_us = _time_eager(step, cfg, cuda)
        # Written before any teardown, so a slow NCCL shutdown cannot lose the figures.
        result = {"with": _summary(with_us), "without": _summary(without_us)}
        Path(cfg["outdir"], f"rank{rank}.json").write_text(json.dumps(result))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _allreduce_op(cfg: dict, device):
    """(allreduce(t) -> reduced tensor, context manager around graph capture) for the config's proto.

    NCCL protocols reduce in place through torch.distributed. `custom` is vLLM's own kernel
    (what a TP=2 decode step on NVLink runs by default): out of place, and its graph buffers
    are registered when the capture context closes, as vLLM does."""
    import contextlib

    import torch.distributed as dist

    if cfg["proto"] != CUSTOM:
        def nccl(t):
            dist.all_reduce(t)
            return t
        return nccl, contextlib.nullcontext

    import os
    os.environ.setdefault("VLLM_SKIP_P2P_CHECK", "1")  # trust the driver's P2P report: no helper processes
    try:
        from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce
    except Exception as e:  # noqa: BLE001 - any import failure means the same thing here
        raise RuntimeError(f"vLLM's custom allreduce is not importable on this host: {type(e).__name__}: {e}") from None
    ca = CustomAllreduce(dist.new_group(backend="gloo"), device)
    if getattr(ca, "_p2p_pending", False):
        ca.finalize_p2p()
    if ca.disabled:
        raise RuntimeError("vLLM disabled its custom allreduce on this host (see its log lines above)")

    def custom(t):
        out = ca.custom_all_reduce(t)
        if out is None:
            raise RuntimeError(f"vLLM's custom allreduce refused a {t.numel() * t.element_size()}-byte tensor")
        return out
    return custom, ca.capture


def _build_step(rank: int, cfg: dict, device, allreduce):
    """The proxy step as a function step(with_allreduce) -> final hidden state."""
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, cfg["dtype"])
    hidden = cfg["hidden_size"]
    gen = torch.Generator(device=device).manual_seed(1000 + rank)  # shards differ between ranks

    def matrix(rows, cols):
        return torch.randn(rows, cols, generator=gen, device=device, dtype=dtype) / math.sqrt(cols)

    layers = [[(matrix(k, hidden), matrix(hidden, k)) for k in cfg["inner_dims"]] for _ in range(cfg["layers"])]
    norm_weight = torch.ones(hidden, device=device, dtype=torch.float32)
    # The hidden state is replicated across ranks (the residual stream is): one seed for all.
    x0 = torch.randn(cfg["batch"], hidden, generator=torch.Generator(device=device).manual_seed(999),
                     device=device, dtype=dtype)

    def step(with_allreduce: bool):
        h = x0
        for blocks in layers:
            for up, down in blocks:
                y = F.linear(F.linear(h, up), down)
                if with_allreduce:
                    y = allreduce(y)
                residual = y.float() + h.float()  # the residual add and the norm in float32, as vLLM
                if cfg["norm"] == "fused":
                    h = F.rms_norm(residual, (hidden,), norm_weight, RMS_EPS).to(dtype)
                else:  # separate kernels: what a step written with torch ops launches
                    rms = torch.rsqrt(residual.pow(2).mean(-1, keepdim=True) + RMS_EPS)
                    h = (residual * rms * norm_weight).to(dtype)
        return h

    return step


def _check(step, cfg: dict) -> None:
    """After the allreduces every rank holds the same state: summing it gives n times it."""
    import torch
    import torch.distributed as dist

    h = step(True)
    total = h.clone()
    dist.all_reduce(total)
    n = cfg["world_size"]
    if not bool(torch.isfinite(h).all()) or not torch.allclose(total.float(), n * h.float(), rtol=2e-2, atol=1e-2):
        raise RuntimeError("the interleaved step's ranks disagree after the allreduces")


def _time_graphs(step, cfg: dict, capture) -> tuple[list[float], list[float]]:
    import torch
    import torch.distributed as dist

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch's graph docs ask
        for _ in range(2):
            step(True)
            step(False)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graphs = {}
    with capture():
        for name, with_ar in (("with", True), ("without", False)):
            graphs[name] = torch.cuda.CUDAGraph()
            # thread_local: ProcessGroupNCCL's watchdog thread may query events while we capture.
            with torch.cuda.graph(graphs[name], capture_error_mode="thread_local"):
                step(with_ar)
    for g in graphs.values():
        for _ in range(max(1, cfg["warmup"])):
            g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    timed = {"with": [], "without": []}
    group = cfg["group"]
    for i in range(math.ceil(cfg["iters"] / group)):
        for name in (("with", "without") if i % 2 == 0 else ("without", "with")):
            for _ in range(group):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                graphs[name].replay()
                e.record()
                timed[name].append((s, e))
    torch.cuda.synchronize()
    out = tuple([s.elapsed_time(e) * 1000.0 for s, e in timed[name]] for name in ("with", "without"))
    del graphs
    return out


def _time_eager(step, cfg: dict, cuda: bool) -> tuple[list[float], list[float]]:
    import torch
    import torch.distributed as dist

    for _ in range(cfg["warmup"]):
        step(True)
        step(False)
    dist.barrier()
    timed = {"with": [], "without": []}
    for i in range(cfg["iters"]):
        for name in (("with", "without") if i % 2 == 0 else ("without", "with")):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step(name == "with")
            if cuda:
                torch.cuda.synchronize()
            timed[name].append((time.perf_counter() - t0) * 1e6)
    return timed["with"], timed["without"]


def _summary(samples: list[float]) -> dict:
    return {"us": stats.median(samples), "us_p10": stats.percentile(samples, 10),
            "us_p90": stats.percentile(samples, 90), "n": len(samples)}


# ---------------------------------------------------------------- the parent

def run_interleaved(*, backend: str = "auto", world_size: int | None = None, hidden_size: int = 4096,
                    gemv_bytes: list[int] | None = None, model_config: dict | None = None, layers: int | None = None,
                    dtype: str = "bf16", batch: int = 1, protos: list[str] | None = None, iters: int = 100,
                    warmup: int = 10, graph: bool = True, norm: str = "fused", timeout_s: float = 600.0) -> dict:
    """Time the proxy step with and without its allreduces; return the JSON document."""
    protos = protos or ["default"]
    if iters < 2 or warmup < 0 or (layers is not None and layers < 1) or batch < 1:
        raise CommError("--iters must be at least 2, --layers and --batch at least 1, --warmup at least 0")
    if norm not in NORMS:
        raise CommError(f"--norm must be one of {', '.join(NORMS)}, got {norm!r}")
    backend, world_size = resolve_backend(backend, world_size, protos)
    dtype_name, elem = dtype_info(dtype)
    notes = []
    if backend == "gloo" and dtype_name != "float32":
        notes.append(f"CPU (gloo): float32 instead of {DTYPE_SHORT[dtype_name]}; the figure only shows "
                     "that the mode runs, it says nothing about a GPU")
        dtype_name, elem = "float32", 4
    if model_config is not None:
        hidden_size = int(model_config.get("hidden_size") or 0)
        gemv_bytes = gemv_blocks_from_config(model_config, tensor_parallel_size=world_size, elem_bytes=elem)
    if hidden_size <= 0:
        raise CommError("--hidden-size must be positive")
    if not gemv_bytes or min(gemv_bytes) <= 0:
        raise CommError("give --gemv-mb (MiB of weights per GEMV block, per GPU) or --model-config")
    dims = [inner_dim(b, hidden_size=hidden_size, elem_bytes=elem) for b in gemv_bytes]
    layers, capped = proxy_layers(requested=layers, config=model_config, block_bytes=gemv_bytes)
    notes += [capped] if capped else []
    timing = "graph" if graph and backend == "nccl" else "eager"
    if graph and timing == "eager":
        notes.append("eager timing: CUDA graphs need CUDA (gloo runs on CPU)")
    calls = layers * len(dims)
    group = max(1, min(10, iters // 4))
    started = time.monotonic()
    results = []
    for proto in protos:
        cfg = {"backend": backend, "world_size": world_size, "proto": proto, "dtype": dtype_name,
               "hidden_size": hidden_size, "batch": batch, "layers": layers, "inner_dims": dims,
               "iters": iters, "warmup": warmup, "graph": timing == "graph", "group": group, "norm": norm,
               "timeout_s": timeout_s}
        try:
            per_rank = run_ranks(cfg, timeout_s, target=_worker)
        except Exception as e:  # one protocol's failure must not lose the others
            notes.append(f"proto {proto} failed: {type(e).__name__}: {str(e).strip()[-2000:]}")
            continue
        results.append(_result_row(proto, per_rank, calls=calls, nbytes=hidden_size * elem * batch,
                                   dtype_name=dtype_name, timing=timing))
    doc = host_facts(backend, world_size)
    doc.update({
        "mode": "interleaved", "timing": timing, "dtype": DTYPE_SHORT[dtype_name],
        "hidden_size": hidden_size, "batch": batch, "layers": layers, "norm": norm,
        "gemv_bytes": [2 * k * hidden_size * elem for k in dims], "gemv_inner_dims": dims,
        "calls_per_step": calls, "bytes": hidden_size * elem * batch, "protos": protos,
        "iters": iters, "warmup": warmup,
        "us_is": "marginal cost per allreduce: (slowest rank's median step with allreduces - slowest "
                 "rank's median step without) / allreduces per step",
        "env": nccl_env(), "notes": notes, "elapsed_s": round(time.monotonic() - started, 1),
        "results": results,
    })
    return doc


def _result_row(proto: str, per_rank: list[dict], *, calls: int, nbytes: int, dtype_name: str, timing: str) -> dict:
    with_by_rank = [r["with"]["us"] for r in per_rank]
    without_by_rank = [r["without"]["us"] for r in per_rank]
    return {
        "proto": proto, "mode": "interleaved", "timing": timing, "bytes": nbytes, "dtype": DTYPE_SHORT[dtype_name],
        "calls": calls,
        "us": round(marginal_us(with_us_by_rank=with_by_rank, without_us_by_rank=without_by_rank, calls=calls), 3),
        "us_by_rank": [round((w - wo) / calls, 3) for w, wo in zip(with_by_rank, without_by_rank)],
        "step_us_with": round(max(with_by_rank), 2), "step_us_without": round(max(without_by_rank), 2),
        "step_us_with_by_rank": [round(x, 2) for x in with_by_rank],
        "step_us_without_by_rank": [round(x, 2) for x in without_by_rank],
        "step_us_p90_with": round(max(r["with"]["us_p90"] for r in per_rank), 2),
        "step_us_p90_without": round(max(r["without"]["us_p90"] for r in per_rank), 2),
        "samples": min(r["with"]["n"] for r in per_rank),
    }


def format_table(doc: dict) -> str:
    head = (f"allreduce inside a proxy decode step ({doc['timing']}), {doc['backend']}, {doc['world_size']} x "
            f"{doc['device']}, hidden {doc['hidden_size']}, {doc['layers']} layers x "
            f"{len(doc['gemv_bytes'])} blocks ({', '.join(f'{b / MIB:.4g} MiB' for b in doc['gemv_bytes'])})")
    lines = [head, f"{'proto':8} {'calls':>5} {'step with us':>13} {'without us':>11} {'marginal us/call':>17}"]
    for r in doc["results"]:
        lines.append(f"{r['proto']:8} {r['calls']:>5} {r['step_us_with']:>13.1f} {r['step_us_without']:>11.1f} "
                     f"{r['us']:>17.2f}")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)
