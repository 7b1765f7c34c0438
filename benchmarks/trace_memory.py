"""Peak memory and time of parsing a large profiler trace (a trace of hundreds of MB).

Writes a synthetic kineto-style trace (300 MB by default): many events the allreduce parser does
not need (Python frames, unrelated CPU ops, instant and flow events) around a few decode steps
with their launches, GPU kernels (3 allreduce, 1 all_gather each) and GPU annotations. Then
parses it in two fresh Python processes:

* stream: `runners.probes.trace.parse_trace` (ijson, only the needed events kept);
* whole: the old path, `load_trace` (the file read and json-decoded whole) + `parse_events`.

Each prints its seconds and peak RSS, and the parent checks that both give the same figures.

    .venv/bin/python benchmarks/trace_memory.py [--mb 300] [--gzip] [--json]
"""
import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from runners.probes import trace

def peak_mb():
    # VmHWM, not ru_maxrss: Linux carries the parent's peak RSS into ru_maxrss across fork + exec.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024

mode, path = sys.argv[1], sys.argv[2]
before, t0 = peak_mb(), time.perf_counter()
if mode == "stream":
    result = trace.parse_trace(path)
else:
    result = trace.parse_events(trace.load_trace(path)["traceEvents"])
seconds = time.perf_counter() - t0
result.pop("file", None), result.pop("rank", None)
print(json.dumps({"seconds": seconds, "baseline_mb": before, "peak_mb": peak_mb(), "result": result}))
"""

CPU, GPU, STREAM = 4242, 0, 7
KERNELS = [("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 200.0),
           ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 20.0),
           ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 200.0),
           ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, vllm::RankSignals, "
            "vllm::Signal*, __nv_bfloat16*, int, int)", 5.0),
           ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", 200.0),
           ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 20.0),
           ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 15.0)]


def x(cat, name, pid, tid, ts, dur, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def step_events(name: str, t: float, corr: int) -> list[dict]:
    """One step: its CPU annotation, a launch and a kernel per entry of KERNELS, the GPU annotation."""
    out, k_t = [x("user_annotation", name, CPU, CPU, t, 800.0)], t + 300.0
    for j, (kname, dur) in enumerate(KERNELS):
        c = corr + j
        out.append(x("cuda_runtime", "cudaLaunchKernel", CPU, CPU, t + 50 + 40 * j, 10.0, correlation=c))
        out.append(x("kernel", kname, GPU, STREAM, k_t, dur, correlation=c, device=0, stream=STREAM,
                     grid=[132, 1, 1], block=[512, 1, 1], **{"registers per thread": 128}))
        k_t += dur + 5.0
    out.append(x("gpu_user_annotation", name, GPU, STREAM, t + 300.0, k_t - 5.0 - t - 300.0))
    return out


def filler(i: int, t: float) -> list[dict]:
    """What most of a real trace is and the parser drops: Python frames, other ops, flows."""
    return [x("python_function", f"vllm/model_executor/layers/linear.py({i % 997}): forward", CPU, CPU, t, 3.0,
              **{"Python parent id": i, "Python id": i + 1, "Python module id": 7}),
            x("cpu_op", "aten::linear", CPU, CPU, t + 0.5, 2.0, **{"Input Dims": [[1, 4096], [4096, 4096], [4096]],
              "Input type": ["c10::BFloat16"] * 3, "Record function id": i, "Sequence number": i, "Fwd thread id": 0}),
            {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": CPU, "tid": CPU, "ts": t, "s": "t"},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": CPU, "tid": CPU, "ts": t, "bp": "e"}]


def write_trace(path: Path, target_bytes: int, steps: int) -> int:
    """Stream a trace of about TARGET_BYTES to PATH, never holding it: returns its size."""
    per_block = len(json.dumps(filler(0, 0.0))) + 2
    blocks = max(1, target_bytes // per_block // (steps + 1))
    opener = gzip.open if path.suffix == ".gz" else open
    size, i = 0, 0
    with opener(path, "wt") as f:
        size += f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": [')
        names = ["execute_context_1(40)_generation_0(0)"] + ["execute_context_0(0)_generation_1(1)"] * steps
        for s, name in enumerate(names):
            t = 1e6 + s * 2_000.0
            size += f.write(",\n".join(json.dumps(e) for e in step_events(name, t, 1000 + 100 * s)))
            for _ in range(blocks):
                size += f.write(",\n" + ",\n".join(json.dumps(e) for e in filler(i, t + (i % 1000) * 1.5)))
                i += 1
            size += f.write(",\n" if s < steps else "")
        size += f.write('], "traceName": "synthetic"}')
    return size


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{mode} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=300, help="uncompressed size of the trace, MB")
    ap.add_argument("--steps", type=int, default=20, help="decode steps in the trace")
    ap.add_argument("--gzip", action="store_true", help="write .json.gz, as torch does with gzip on")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("synthetic_rank0.pt.trace.json" + (".gz" if a.gzip else ""))
        size = write_trace(path, a.mb * 10**6, a.steps)
        rows = {mode: measure(mode, path) for mode in ("stream", "whole")}
        on_disk = path.stat().st_size
    parsed = rows["stream"].pop("result")
    same = parsed == rows["whole"].pop("result")
    report = {"trace_mb": round(size / 1e6, 1), "file_mb": round(on_disk / 1e6, 1), "identical": same,
              "decode_steps": parsed["decode_steps"], "allreduce_share": parsed["allreduce_share"], **rows}
    if a.json:
        print(json.dumps(report))
        return
    print(f"trace {report['trace_mb']} MB JSON ({report['file_mb']} MB on disk), {a.steps} decode steps; "
          f"same figures from both paths: {same} ({parsed['decode_steps']} steps found, ok {parsed['ok']}, "
          f"allreduce share {parsed['allreduce_share']})")
    print(f"{'path':<8} {'seconds':>8} {'peak RSS MB':>12} {'above base MB':>14}")
    for mode, r in rows.items():
        print(f"{mode:<8} {r['seconds']:8.2f} {r['peak_mb']:12.1f} {r['peak_mb'] - r['baseline_mb']:14.1f}")
    if not same:
        raise SystemExit("the streamed parse differs from the whole-file parse")


if __name__ == "__main__":
    main()
