"""The synthetic TP decode step of docs/reference-figures.md, timed with and without its allreduces (A/B).

    python3 benchmarks/gpu/synthetic_step.py --layers 78 --hidden 6144 --shard 6144 \
        --protos default,LL,LL128,Simple --out ab.json

One process per GPU. Per layer, two blocks, each: h -> W_in (shard x hidden) -> W_out (hidden x
shard) -> allreduce -> residual add -> RMSNorm (float32 arithmetic, vLLM's fused_add_rms_norm in
plain torch). 78 layers, hidden 6144, shard 6144: 23.6 GB of random bf16 weights per GPU, 156
allreduces of 12 KiB per step. Both steps are captured as CUDA graphs in the same processes and
replayed in alternating groups; each replay is timed with CUDA events. The marginal cost per
allreduce is (slowest rank's median step with - slowest rank's median step without) / 156.

This is the ground truth that `runners comm --mode interleaved` must predict. It is written
separately from that probe on purpose (no import from runners/): its own layer structure
(residual, float32 norm, one weight set per layer of the full model), where the probe uses a
proxy of a few layers built from the model config.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time

PROTOS = ["default", "LL", "LL128", "Simple"]


def rank_main(rank, cfg):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(cfg["port"]))
    if cfg["proto"] == "default":
        os.environ.pop("NCCL_PROTO", None)
    else:
        os.environ["NCCL_PROTO"] = cfg["proto"]
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=cfg["world"], device_id=dev)
    H, S, bf = cfg["hidden"], cfg["shard"], torch.bfloat16
    torch.manual_seed(7)  # the hidden state is replicated across ranks; the weight shards differ
    x = torch.randn(1, H, device=dev, dtype=bf)
    torch.manual_seed(8 + rank)
    weights = [[((torch.randn(S, H, device=dev) * H ** -0.5).to(bf), (torch.randn(H, S, device=dev) * S ** -0.5).to(bf))
                for _ in range(2)] for _ in range(cfg["layers"])]
    gamma = torch.ones(H, device=dev, dtype=torch.float32)

    def decode_step(allreduce):
        h = x
        for layer in weights:
            for w_in, w_out in layer:
                y = torch.matmul(torch.matmul(h, w_in.t()), w_out.t())
                if allreduce:
                    dist.all_reduce(y)
                r = (y.float() + h.float())
                if cfg["norm"] == "fused":  # one norm kernel, as vLLM's fused_add_rms_norm
                    h = torch.nn.functional.rms_norm(r, (H,), gamma, 1e-5).to(bf)
                else:
                    h = (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-5) * gamma).to(bf)
        return h

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            decode_step(True), decode_step(False)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graphs = {}
    for name in ("A", "B"):
        graphs[name] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[name], capture_error_mode="thread_local"):
            out = decode_step(name == "A")
        if name == "A":
            out_a = out
    graphs["A"].replay()
    torch.cuda.synchronize()
    check = out_a.clone()
    dist.all_reduce(check)  # identical on every rank after the step's allreduces
    same = bool(torch.allclose(check.float(), cfg["world"] * out_a.float(), rtol=2e-2, atol=1e-2))
    for g in graphs.values():
        for _ in range(3):
            g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    times = {"A": [], "B": []}
    for rnd in range(cfg["rounds"]):
        for name in ("A", "B") if rnd % 2 == 0 else ("B", "A"):
            for _ in range(cfg["group"]):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                graphs[name].replay()
                e1.record()
                times[name].append((e0, e1))
    torch.cuda.synchronize()
    res = {k: [a.elapsed_time(b) * 1000 for a, b in v] for k, v in times.items()}
    with open(os.path.join(cfg["outdir"], f"r{rank}.json"), "w") as f:  # before any teardown
        json.dump({"with_us": statistics.median(res["A"]), "without_us": statistics.median(res["B"]),
                   "with_p90": sorted(res["A"])[int(0.9 * len(res["A"]))],
                   "without_p90": sorted(res["B"])[int(0.9 * len(res["B"]))], "ranks_agree": same}, f)
    # NCCL teardown with captured graphs alive can hang: leave it to the process's exit.
    sys.stdout.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    import torch
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=78)
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--shard", type=int, default=6144, help="inner size per GPU of each block's GEMV pair")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--protos", default=",".join(PROTOS))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--group", type=int, default=10)
    ap.add_argument("--norm", choices=["ops", "fused"], default="ops",
                    help="the RMSNorm as separate torch ops (the issue's step) or one fused kernel")
    ap.add_argument("--out", default=None)
    ap.add_argument("--timeout-s", type=float, default=120.0, help="limit per protocol's processes")
    a = ap.parse_args()
    calls = 2 * a.layers
    rows = []
    started = time.monotonic()
    for proto in a.protos.split(","):
        with tempfile.TemporaryDirectory() as d:
            cfg = dict(vars(a), proto=proto, port=free_port(), outdir=d)
            t0 = time.monotonic()
            ctx = mp.spawn(rank_main, args=(cfg,), nprocs=a.world, join=False)
            deadline = time.monotonic() + a.timeout_s
            try:
                while not ctx.join(timeout=1.0):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{proto}: ranks still running after {a.timeout_s} s")
            except Exception as e:  # a hang or a crash: say so, keep the other protocols
                for proc in ctx.processes:
                    if proc.is_alive():
                        proc.kill()
                print(f"{proto:8} FAILED: {type(e).__name__}: {str(e)[-500:]}", flush=True)
                continue
            ranks = [json.load(open(os.path.join(d, f"r{r}.json"))) for r in range(a.world)]
        w, wo = max(r["with_us"] for r in ranks), max(r["without_us"] for r in ranks)
        rows.append({"proto": proto, "step_us_with": round(w, 2), "step_us_without": round(wo, 2),
                     "calls": calls, "marginal_us": round((w - wo) / calls, 3),
                     "tok_s_with": round(1e6 / w, 2), "tok_s_without": round(1e6 / wo, 2),
                     "by_rank": ranks, "elapsed_s": round(time.monotonic() - t0, 1)})
        print(f"{proto:8} with {w / 1000:7.3f} ms  without {wo / 1000:7.3f} ms  marginal {rows[-1]['marginal_us']:6.2f} "
              f"us/call  ranks agree {all(r['ranks_agree'] for r in ranks)}", flush=True)
    v = torch.cuda.nccl.version()
    doc = {"what": "synthetic TP decode step A/B (benchmarks/gpu/synthetic_step.py)",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(0), "world": a.world, "torch": torch.__version__,
           "nccl": ".".join(map(str, v)) if isinstance(v, tuple) else str(v),
           "layers": a.layers, "norm": a.norm, "hidden": a.hidden, "shard": a.shard, "calls_per_step": calls,
           "weights_gb_per_gpu": round(a.layers * 2 * 2 * a.hidden * a.shard * 2 / 1e9, 2),
           "replays_each": a.rounds // 2 * a.group, "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
           "elapsed_s": round(time.monotonic() - started, 1), "results": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
