"""`python -m runners comm`: the allreduce sweep (sweep.py) or the interleaved mode (interleaved.py).

    python -m runners comm --backend nccl --world-size 2 --hidden-size 6144 --dtype bf16 \\
        --protos default,LL,LL128,Simple --json
    python -m runners comm --mode interleaved --backend nccl --world-size 2 --model-config DIR

Exit status: 0 measured, 1 when a protocol failed (its note goes to stderr), 2 on a bad argument.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import interleaved, sweep
from .options import CommError, parse_bytes, parse_gemv_mb, parse_protos


def add_arguments(parser):
    parser.add_argument("--mode", default="sweep", choices=["sweep", "interleaved"],
                        help="sweep: allreduces alone, per size (default); interleaved: the marginal cost of "
                             "an allreduce inside a proxy decode step (see runners/probes/comm/interleaved.py)")
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
    _add_interleaved_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.add_argument("--output", default=None, help="also write the JSON document to this file")


def _add_interleaved_arguments(parser):
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


def _interleaved_doc(args) -> dict:
    if args.sizes is not None:
        raise CommError("--sizes belongs to the sweep; the interleaved mode allreduces the hidden state")
    config = interleaved.load_config(args.model_config) if args.model_config else None
    if config is None and args.gemv_mb is None:
        raise CommError("--mode interleaved needs --gemv-mb or --model-config")
    return interleaved.run_interleaved(
        backend=args.backend, world_size=args.world_size, hidden_size=args.hidden_size,
        gemv_bytes=parse_gemv_mb(args.gemv_mb) if config is None else None, model_config=config,
        layers=args.layers, dtype=args.dtype, batch=args.batch, protos=parse_protos(args.protos),
        iters=args.iters, warmup=args.warmup, graph=args.graph, norm=args.norm, timeout_s=args.timeout_s)


def _sweep_doc(args) -> dict:
    sizes = None
    if args.sizes is not None:
        sizes = [parse_bytes(p) for p in args.sizes.split(",") if p.strip()]
        if not sizes:
            raise CommError("--sizes is empty")
    return sweep.run_sweep(backend=args.backend, world_size=args.world_size, sizes=sizes,
                           hidden_size=args.hidden_size, dtype=args.dtype, batch=args.batch,
                           max_bytes=parse_bytes(args.max_bytes), protos=parse_protos(args.protos),
                           iters=args.iters, warmup=args.warmup, graph=args.graph,
                           graph_calls=args.graph_calls, timeout_s=args.timeout_s)


def main(args) -> int:
    try:
        if args.mode == "interleaved":
            return _emit(_interleaved_doc(args), args, interleaved.format_table)
        doc = _sweep_doc(args)
    except CommError as e:
        print(f"comm: error: {e}", file=sys.stderr)
        return 2
    return _emit(doc, args, sweep.format_table)


def _emit(doc: dict, args, formatter) -> int:
    text = json.dumps(doc, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text if args.json else formatter(doc))
    failed = [n for n in doc["notes"] if " failed" in n]
    for n in failed:
        print(f"comm: {n}", file=sys.stderr)
    return 1 if failed else 0
