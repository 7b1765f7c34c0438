"""Allreduce-share probe: how much of each decode step goes to tensor-parallel allreduce,
measured with vLLM's torch profiler on a live server.

    args = profiler_engine_args(trace_dir)          # add to the engine's flags
    ... start the engine ...
    result = measure_allreduce_share(base_url=..., model=..., trace_dir=trace_dir, prompt=...)

Engine flags. `profiler_engine_args` returns `--profiler-config {json}` for vLLM's
`ProfilerConfig` (vLLM >= 0.11; 0.32.0 checked): torch profiler, stack recording OFF (with
stacks a worker wrote ~1 GB of JSON per rank and was OOM-killed), no shapes, memory or
FLOPs, gzip on, and `ignore_frontend` (no API-server CPU trace: not needed, and it would
record for the whole session). Enabling the config costs nothing until /start_profile: the
worker's profiler object is created at the first /start_profile, and until then each step
only checks `if not self.profiler`; the config does not enter vLLM's compile hash. So the
job runner should add these flags to the MAIN engine and run this probe after the decode
probe (tok/s must come from unprofiled requests: an active profiler records every op, and
the request it profiles is not representative). A dedicated profiling engine start would
only cost time (60-110 s on the 2-core CPU host at TP=2).

One measurement (`measure_allreduce_share`): POST /start_profile (with a unique
`profile_prefix`, so the files of this session are told apart from older ones), one
streamed greedy completion (temperature 0, ignore_eos, exactly `max_tokens` tokens), POST
/stop_profile (vLLM writes the traces and a summary table before it answers: 4-21 s on
the 2-core CPU host for 64 tokens, ~0.9 MB gzipped per rank), then wait until
every rank's trace file is complete (gzip + JSON parse; torch writes the .gz in place, not
atomically) and parse each one with `parse_trace`.

Trace parsing (`parse_trace`), Chrome trace JSON as written by torch/kineto:

* Decode steps: `user_annotation` events (ph X) that the worker puts around each
  `execute_model`: `execute_context_{C}({Ctok})_generation_{G}({Gtok})`, or with
  `detailed_trace_annotation` `execute_{T}_context_{C}(sq..)_generation_{G}(sq..)`. A decode
  step has C == 0 and G >= 1; prefill (and chunked-prefill) steps have C > 0 and are not
  counted. The sampling call (`sample_tokens`) runs outside the annotation.
* Allreduce, per platform:
  - CPU engine with vLLM's shared-memory communicator (AVX-512 builds of `_C`): the
    synchronous `cpu_op` `_C::shm_allreduce` on the worker thread.
  - CPU engine without it (an AVX2-only host loads `_C_AVX2`, which has no
    `init_shm_manager`; vLLM then logs the misleading "CPU SHM communicator disabled ...
    ranks do not share the same SHM group name" and falls back to torch.distributed/gloo):
    `c10d::allreduce_` on the worker thread is only the ENQUEUE (~150 us); the transfer
    runs on gloo's `pt_gloo_runloop` threads as `user_annotation` `gloo:all_reduce`, while
    the worker waits in `work.wait()`, which records no event. A call is therefore timed
    from the c10d op's start to the end of the gloo work events that start before the next
    c10d op of the process (`source: "cpu_op+gloo"`); counting the c10d op alone gave 8-10 %
    instead of ~50 % (`allreduce_launch_us_per_call` keeps the enqueue time).
  - GPU: device `kernel` events `ncclDevKernel_AllReduce*` / `ncclKernel_AllReduce*`
    (NCCL), `*cross_device_reduce*` (vLLM custom allreduce), and other `*all_reduce*`
    kernels (symmetric memory, quick/one-shot/two-shot allreduce). When any allreduce
    kernel exists the CPU-side ops (`c10d::allreduce_`, `vllm::all_reduce`, the custom-AR
    launch op) are ignored: they only measure the launch, not the transfer.
  - The logits `all_gather` (`_C::shm_all_gather`, `ncclDevKernel_AllGather*`,
    `c10d::allgather_`...) is NOT an allreduce: counted separately.
  Nested matches (a `vllm::all_reduce` custom op around `_C::shm_allreduce`) are counted
  once (the outermost); a step's allreduce time is the union of its calls' intervals.
* Attribution to steps:
  - CPU ops: time containment inside a decode-step annotation of the same process.
  - GPU kernels run later than their CPU launch, so containment in the CPU window is wrong.
    A kernel is tied to its launch by `args.correlation` (the same id on the
    `cuda_runtime` launch event, `cudaLaunchKernel` / `cudaGraphLaunch` / ...; kineto also
    draws it as an `ac2g` flow), and the launch is attributed to the step that contains it.
    Without a correlation, a kernel inside a `gpu_user_annotation` window of a decode step
    (kineto's GPU-side copy of the annotation) is used. Unattributed allreduce kernels are
    reported in `problems`.
  - Step time on GPU: the device window of the step, [first kernel start, last kernel end]
    over all kernels launched inside the step (`step_basis: "kernel_span"`), or the
    matching `gpu_user_annotation`, else the CPU annotation. The CPU window is a poor
    denominator on GPU: with async scheduling the CPU step ends before its kernels do.
  - Traps: under CUDA graphs all kernels of a replay carry the correlation id of the one
    `cudaGraphLaunch`; their individual timings are real but CUPTI may serialise or drop
    them, and kernel time includes waiting for the slowest rank (so each rank is reported;
    the lowest share is nearest the transfer cost). A kernel's name does not tell NCCL's
    protocol (LL / LL128 / Simple). CPU ops on the CPU engine also include the wait for the
    peer rank.

Sanity checks, per rank: decode steps found; every step's allreduce time <= its step time
(1% + 5 us tolerance); 0 <= share <= 1; the same allreduce count in (nearly) every step.
Failures go to `problems` (and `ok` is False) instead of a number that looks valid: the
share of a failed rank is None. A share above 0.8 is kept but flagged in `warnings`.

Result of `parse_trace` (one rank): ok, problems, warnings, source ("cpu_op" | "cpu_op+gloo"
| "kernel"), decode_steps, other_steps, step_names {name: count}, step_basis,
step_ms_median (the share's denominator), cpu_step_ms_median, step_period_ms_median
(start to start: 1000 / tok/s while profiled), allreduce_calls_per_step (median),
allreduce_calls_per_step_set, allreduce_us_per_call (median), allreduce_us_per_step_median,
allreduce_launch_us_per_call (CPU: the op on the worker thread alone), allreduce_total_us,
decode_step_total_us, allreduce_share, kernel_time_share (GPU: share of busy kernel time),
allgather_calls_per_step, allgather_calls_per_step_set, allgather_us_per_call,
allreduce_names, allgather_names, comm_names_seen {name: count}, file, rank.
`measure_allreduce_share` returns `aggregate(...)`: ok, problems, ranks [per rank],
share_min, share_max, calls_per_step, expected_calls_per_step, us_per_call_min,
step_ms_median; plus request, trace_dir, trace_files, profile_prefix, stop_profile_s.
"""
from __future__ import annotations

import bisect
import gzip
import json
import math
import re
import statistics
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

import httpx

from runners.probes.decode import ProbeError

# ----------------------------------------------------------------------------- constants

STEP_RE = re.compile(
    r"^execute_(?:(?P<total>\d+)_)?context_(?P<ctx>\d+)\((?P<ctx_detail>[^)]*)\)"
    r"_generation_(?P<gen>\d+)\((?P<gen_detail>[^)]*)\)$"
)

# Device kernels (GPU).
KERNEL_ALLREDUCE_RE = re.compile(
    r"ncclDevKernel_AllReduce|ncclKernel_AllReduce|cross_device_reduce|all_?reduce",
    re.IGNORECASE,
)
KERNEL_ALLGATHER_RE = re.compile(r"ncclDevKernel_AllGather|ncclKernel_AllGather|all_?gather", re.IGNORECASE)
# CPU ops (CPU engine, or gloo).
CPU_ALLREDUCE_RE = re.compile(
    r"^_C::shm_allreduce$|^c10d::allreduce_$|^vllm::all_reduce$|^vllm::tensor_model_parallel_all_reduce",
    re.IGNORECASE,
)
CPU_ALLGATHER_RE = re.compile(r"^_C::shm_all_?gather$|^c10d::_?allgather|^vllm::all_gather$", re.IGNORECASE)
# gloo runs a collective asynchronously on its `pt_gloo_runloop` threads and records it there
# as a user_annotation; the c10d op on the worker thread is only the enqueue.
GLOO_ALLREDUCE_RE = re.compile(r"^gloo:all_?reduce", re.IGNORECASE)
GLOO_ALLGATHER_RE = re.compile(r"^gloo:all_?gather", re.IGNORECASE)
# Any event name worth listing in `comm_names_seen` (helps when a new backend appears).
COMM_NAME_RE = re.compile(r"all_?reduce|all_?gather|cross_device|nccl|gloo|shm_", re.IGNORECASE)

KERNEL_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}  # cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel

STEP_TOLERANCE_REL = 0.01
STEP_TOLERANCE_US = 5.0
SUSPECT_SHARE = 0.8

TRACE_GLOB_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json")
RANK_RE = re.compile(r"(?:^|_)rank(\d+)(?:\.|_|$)")


class TraceError(ValueError):
    """A trace file cannot be read (not gzip/JSON, no traceEvents)."""


# --------------------------------------------------------------------- engine flags

def profiler_engine_args(trace_dir: Path) -> list[str]:
    """Engine flags that enable vLLM's torch profiler, writing into TRACE_DIR (absolute).

    Add them to the main engine's flags; profiling then runs only between /start_profile
    and /stop_profile (see the module doc for why the main engine is the right place).
    """
    trace_dir = Path(trace_dir).expanduser().resolve()
    config = {
        "profiler": "torch",
        "torch_profiler_dir": str(trace_dir),
        "torch_profiler_with_stack": False,   # default True: ~1 GB JSON per rank, OOM
        "torch_profiler_record_shapes": False,
        "torch_profiler_with_memory": False,
        "torch_profiler_with_flops": False,
        "torch_profiler_use_gzip": True,
        "ignore_frontend": True,              # no API-server trace
    }
    return ["--profiler-config", json.dumps(config, separators=(",", ":"))]


# ---------------------------------------------------------------- expected call count

def expected_allreduce_calls(config: dict, *, tensor_parallel_size: int = 2) -> int:
    """Allreduces per decode step of a dense decoder under tensor parallelism.

    2 per layer (attention o_proj, MLP down_proj: row-parallel) + 1 for the vocab-parallel
    input embedding; 0 at TP=1. The logits' gather is not counted (it is an all_gather).
    For multimodal configs the `text_config` is used. MoE layers also reduce once per block
    in vLLM, so the count holds for them as an approximation.
    """
    if isinstance(tensor_parallel_size, bool) or not isinstance(tensor_parallel_size, int) \
            or tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size must be an integer >= 1, got {tensor_parallel_size!r}")
    if not isinstance(config, dict):
        raise ValueError("config must be a dict (a HF config.json)")
    cfg = config
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    layers = cfg.get("num_hidden_layers", cfg.get("n_layer", cfg.get("num_layers")))
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"config has no valid num_hidden_layers: {layers!r}")
    if tensor_parallel_size == 1:
        return 0
    return 2 * layers + 1


# ------------------------------------------------------------------------ trace I/O

def load_trace(path: Path) -> dict:
    """Read a Chrome trace (.json or .json.gz). Raise TraceError when incomplete or invalid."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile, ValueError, UnicodeDecodeError) as e:
        raise TraceError(f"{path.name}: not a complete trace ({type(e).__name__}: {e})") from e
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f"{path.name}: no traceEvents list")
    return data


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


class _Ev:
    __slots__ = ("name", "cat", "pid", "tid", "ts", "dur", "end", "corr")

    def __init__(self, e: dict):
        self.name = str(e.get("name", ""))
        self.cat = str(e.get("cat", ""))
        self.pid = e.get("pid")
        self.tid = e.get("tid")
        self.ts = _num(e.get("ts"))
        self.dur = _num(e.get("dur"))
        self.end = self.ts + self.dur if self.ts is not None and self.dur is not None else None
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        c = args.get("correlation")
        self.corr = c if isinstance(c, int) and not isinstance(c, bool) and c > 0 else None


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _outermost(events: list[_Ev]) -> list[_Ev]:
    """Drop events nested inside another event of the list (same pid and tid)."""
    out: list[_Ev] = []
    last_end: dict[tuple, float] = {}
    for e in sorted(events, key=lambda e: (e.ts, -e.dur)):
        key = (e.pid, e.tid)
        if key in last_end and e.end <= last_end[key] + 1e-3:
            continue
        out.append(e)
        last_end[key] = max(last_end.get(key, -math.inf), e.end)
    return out


class _Call:
    """One collective call on the CPU: the op on the worker thread, extended to the end of the
    asynchronous gloo work it started (the worker thread waits for it: all_reduce is sync)."""
    __slots__ = ("name", "pid", "tid", "ts", "end", "dur", "launch_us")

    def __init__(self, op: _Ev, end: float):
        self.name, self.pid, self.tid, self.ts = op.name, op.pid, op.tid, op.ts
        self.end = max(op.end, end)
        self.dur = self.end - self.ts
        self.launch_us = op.dur


def _with_async_work(ops: list[_Ev], async_evs: list[_Ev]) -> list[_Call]:
    """Pair each op with the gloo work events that start after it and before the next op of
    the same kind in the same process (gloo may use several run-loop threads)."""
    by_pid: dict = {}
    for e in async_evs:
        by_pid.setdefault(e.pid, []).append(e)
    for lst in by_pid.values():
        lst.sort(key=lambda e: e.ts)
    ops_by_pid: dict = {}
    for op in ops:
        ops_by_pid.setdefault(op.pid, []).append(op)
    calls = []
    for pid, lst in ops_by_pid.items():
        lst.sort(key=lambda e: e.ts)
        work = by_pid.get(pid, [])
        work_ts = [w.ts for w in work]
        for j, op in enumerate(lst):
            nxt = lst[j + 1].ts if j + 1 < len(lst) else math.inf
            lo, hi = bisect.bisect_left(work_ts, op.ts), bisect.bisect_left(work_ts, nxt)
            end = max((w.end for w in work[lo:hi]), default=op.end)
            calls.append(_Call(op, end))
    return calls


def _union_us(events: Iterable[_Ev]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for e in sorted(events, key=lambda e: e.ts):
        if cur_e is None or e.ts > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = e.ts, e.end
        else:
            cur_e = max(cur_e, e.end)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def _containing(step_starts: list[float], steps: list[dict], ts: float, end: float, pid=None) -> int | None:
    """Index of the step whose window contains [ts, end] (steps sorted by start, disjoint per pid)."""
    i = bisect.bisect_right(step_starts, ts) - 1
    while i >= 0:
        s = steps[i]
        if s["ts"] <= ts and end <= s["end"] + 1e-3 and (pid is None or s["pid"] == pid):
            return i
        if s["ts"] < ts - 60e6:  # look back at most a minute (overlapping pids)
            break
        i -= 1
    return None


# --------------------------------------------------------------------------- parsing

def parse_trace(path: Path) -> dict:
    """Parse one rank's trace file; see the module doc. Never raises on odd content:
    an unreadable file raises TraceError, anything else goes to `problems`."""
    path = Path(path)
    data = load_trace(path)
    result = _parse_events(data["traceEvents"])
    result["file"] = path.name
    m = RANK_RE.search(path.name)
    result["rank"] = int(m.group(1)) if m else None
    return result


def _parse_events(raw_events: list) -> dict:
    problems: list[str] = []
    events = []
    for e in raw_events:
        if isinstance(e, dict) and e.get("ph") == "X":
            ev = _Ev(e)
            if ev.ts is not None and ev.dur is not None and ev.dur >= 0:
                events.append(ev)

    all_steps, decode_steps = [], []
    step_names: dict[str, int] = {}
    gpu_annotations: dict[str, list[_Ev]] = {}
    for ev in events:
        if ev.cat == "gpu_user_annotation":
            if STEP_RE.match(ev.name):
                gpu_annotations.setdefault(ev.name, []).append(ev)
            continue
        if ev.cat != "user_annotation":
            continue
        m = STEP_RE.match(ev.name)
        if not m:
            continue
        all_steps.append(ev)
        if int(m.group("ctx")) == 0 and int(m.group("gen")) >= 1:
            decode_steps.append(ev)
            step_names[ev.name] = step_names.get(ev.name, 0) + 1
    decode_steps.sort(key=lambda e: e.ts)

    kernels = [e for e in events if e.cat in KERNEL_CATS]
    k_ar = [e for e in kernels if e.cat == "kernel" and KERNEL_ALLREDUCE_RE.search(e.name)]
    k_ag = [e for e in kernels if e.cat == "kernel" and KERNEL_ALLGATHER_RE.search(e.name)
            and not KERNEL_ALLREDUCE_RE.search(e.name)]
    cpu_ops = [e for e in events if e.cat == "cpu_op"]
    c_ar = [e for e in cpu_ops if CPU_ALLREDUCE_RE.search(e.name)]
    c_ag = [e for e in cpu_ops if CPU_ALLGATHER_RE.search(e.name)]
    g_ar = [e for e in events if e.cat in ("cpu_op", "user_annotation") and GLOO_ALLREDUCE_RE.search(e.name)]
    g_ag = [e for e in events if e.cat in ("cpu_op", "user_annotation") and GLOO_ALLGATHER_RE.search(e.name)]
    comm_names: dict[str, int] = {}
    for e in events:
        if e.cat in ("kernel", "cpu_op", "user_annotation") and COMM_NAME_RE.search(e.name) \
                and not STEP_RE.match(e.name):
            comm_names[e.name] = comm_names.get(e.name, 0) + 1

    device = bool(kernels)
    source = "kernel" if (k_ar or (device and not c_ar)) else ("cpu_op+gloo" if g_ar else "cpu_op")

    steps = [{"name": s.name, "pid": s.pid, "tid": s.tid, "ts": s.ts, "end": s.end, "cpu_us": s.dur,
              "ar": [], "ag": [], "kernels": []} for s in decode_steps]
    starts = [s["ts"] for s in steps]
    unattributed_ar = 0

    launch_us: list[float] = []
    if source != "kernel":
        for kind, evs, async_evs in (("ar", c_ar, g_ar), ("ag", c_ag, g_ag)):
            for call in _with_async_work(_outermost(evs), async_evs):
                i = _containing(starts, steps, call.ts, call.ts, call.pid)
                if i is not None:
                    steps[i][kind].append(call)
                    if kind == "ar":
                        launch_us.append(call.launch_us)
        for s in steps:
            s["step_us"], s["basis"] = s["cpu_us"], "cpu_annotation"
    else:
        launches = {e.corr: e for e in events if e.cat in LAUNCH_CATS and e.corr is not None}
        gpu_windows = []  # (step index, gpu annotation) paired in order by name
        by_name: dict[str, list[int]] = {}
        for i, s in enumerate(steps):
            by_name.setdefault(s["name"], []).append(i)
        for name, idxs in by_name.items():
            anns = sorted(gpu_annotations.get(name, []), key=lambda e: e.ts)
            if len(anns) == len(idxs):
                gpu_windows += list(zip(idxs, anns))
        gpu_win_of = dict(gpu_windows)
        gw_sorted = sorted(gpu_windows, key=lambda p: p[1].ts)

        def step_of_kernel(k: _Ev) -> int | None:
            launch = launches.get(k.corr) if k.corr is not None else None
            if launch is not None:
                return _containing(starts, steps, launch.ts, launch.ts, launch.pid)
            for i, g in gw_sorted:
                if g.ts <= k.ts and k.end <= g.end + 1e-3:
                    return i
            return None

        for k in kernels:
            i = step_of_kernel(k)
            if i is not None:
                steps[i]["kernels"].append(k)
        for kind, evs in (("ar", k_ar), ("ag", k_ag)):
            for e in evs:
                i = step_of_kernel(e)
                if i is not None:
                    steps[i][kind].append(e)
                elif kind == "ar" and _overlaps_decode(e, steps, gpu_win_of):
                    unattributed_ar += 1
        for i, s in enumerate(steps):
            if s["kernels"]:
                s["step_us"] = max(k.end for k in s["kernels"]) - min(k.ts for k in s["kernels"])
                s["basis"] = "kernel_span"
            elif i in gpu_win_of:
                s["step_us"], s["basis"] = gpu_win_of[i].dur, "gpu_annotation"
            else:
                s["step_us"], s["basis"] = s["cpu_us"], "cpu_annotation"
        if unattributed_ar:
            problems.append(f"{unattributed_ar} allreduce kernel(s) during decode could not be tied to a step "
                            "(no correlation with a launch inside a step, no gpu_user_annotation)")

    # ------------------------------------------------------------------ per step figures
    ar_counts, ar_us_steps, ag_counts, step_us = [], [], [], []
    per_call_us, ag_call_us = [], []
    over_steps = outside = 0
    for s in steps:
        if source != "kernel":
            outside += sum(1 for c in s["ar"] if c.end > s["end"] + STEP_TOLERANCE_US)
        ar = s["ar"]
        ar_time = _union_us(ar)
        ar_counts.append(len(ar))
        ar_us_steps.append(ar_time)
        ag_counts.append(len(s["ag"]))
        per_call_us += [e.dur for e in ar]
        ag_call_us += [e.dur for e in s["ag"]]
        step_us.append(s["step_us"])
        if ar_time > s["step_us"] * (1 + STEP_TOLERANCE_REL) + STEP_TOLERANCE_US:
            over_steps += 1

    periods = [b["ts"] - a["ts"] for a, b in zip(steps, steps[1:])]
    total_step = sum(step_us)
    total_ar = sum(ar_us_steps)
    share = total_ar / total_step if total_step > 0 else None
    distinct = sorted(set(ar_counts))

    if not steps:
        problems.append("no decode steps (user_annotation execute_context_0(..)_generation_N(..)) in the trace"
                        + (f"; {len(all_steps)} prefill/mixed step(s) seen" if all_steps else ""))
        share = None
    if over_steps:
        problems.append(f"allreduce time exceeds the step time in {over_steps} of {len(steps)} decode steps")
        share = None
    if outside:
        problems.append(f"{outside} allreduce call(s) (with their gloo work) end after their decode step")
        share = None
    if share is not None and not 0.0 <= share <= 1.0:
        problems.append(f"allreduce share {share:.4f} outside [0, 1]")
        share = None
    if len(distinct) > 1:
        mode = max(distinct, key=ar_counts.count)
        odd = sum(1 for c in ar_counts if c != mode)
        if odd > max(1, len(ar_counts) // 10):
            problems.append(f"allreduce calls per step vary: {distinct} (mode {mode}, {odd} steps differ)")
    if steps and not any(ar_counts):
        problems.append("no allreduce events inside decode steps (TP=1, or an allreduce implementation "
                        f"this parser does not know; communication-like names seen: {sorted(comm_names) or 'none'})")

    warnings: list[str] = []
    if share is not None and share > SUSPECT_SHARE:
        warnings.append(f"allreduce share {share:.2f} is suspiciously high: the time includes waiting for "
                        "the slower rank (and, under CUDA graphs, replay timing artefacts); compare ranks and "
                        "an A/B measurement")
    kernel_share = None
    if source == "kernel" and steps:
        busy = sum(_union_us(s["kernels"]) for s in steps)
        kernel_share = total_ar / busy if busy > 0 else None

    return {
        "ok": not problems,
        "problems": problems,
        "warnings": warnings,
        "source": source,
        "decode_steps": len(steps),
        "other_steps": len(all_steps) - len(steps),  # prefill, mixed, empty
        "step_names": step_names,
        "step_basis": sorted({s["basis"] for s in steps}),
        "step_ms_median": _ms(_median(step_us)),
        "cpu_step_ms_median": _ms(_median([s["cpu_us"] for s in steps])),
        "step_period_ms_median": _ms(_median(periods)),
        "allreduce_calls_per_step": statistics.median_low(ar_counts) if ar_counts else None,
        "allreduce_calls_per_step_set": distinct,
        "allreduce_us_per_call": _round(_median(per_call_us)),
        "allreduce_us_per_step_median": _round(_median(ar_us_steps)),
        "allreduce_launch_us_per_call": _round(_median(launch_us)),
        "allreduce_total_us": _round(total_ar),
        "decode_step_total_us": _round(total_step),
        "allreduce_share": _round(share, 6),
        "kernel_time_share": _round(kernel_share, 6),
        "allgather_calls_per_step": statistics.median_low(ag_counts) if ag_counts else None,
        "allgather_calls_per_step_set": sorted(set(ag_counts)),
        "allgather_us_per_call": _round(_median(ag_call_us)),
        "allreduce_names": sorted({e.name for e in (k_ar if source == "kernel" else c_ar + g_ar)}),
        "allgather_names": sorted({e.name for e in (k_ag if source == "kernel" else c_ag + g_ag)}),
        "comm_names_seen": comm_names,
    }


def _overlaps_decode(e: _Ev, steps: list[dict], gpu_win_of: dict) -> bool:
    if not steps:
        return False
    lo = min(s["ts"] for s in steps)
    hi = max([s["end"] for s in steps] + [g.end for g in gpu_win_of.values()])
    return lo <= e.ts <= hi


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000.0, 4)


def _round(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


# ----------------------------------------------------------------------- aggregation

def aggregate(ranks: list[dict], *, expected_calls: int | None = None) -> dict:
    """Combine per-rank results: `share_min` (lowest rank: nearest the transfer cost, the
    others include waiting for the slower rank), `share_max`, `calls_per_step`, ..."""
    problems = [f"rank {r.get('rank')}: {p}" for r in ranks for p in r.get("problems", [])]
    shares = [r["allreduce_share"] for r in ranks if r.get("allreduce_share") is not None]
    calls = {r.get("allreduce_calls_per_step") for r in ranks}
    calls_per_step = None
    if len(calls) == 1:
        calls_per_step = calls.pop()
    elif ranks:
        problems.append(f"ranks disagree on allreduce calls per step: {sorted(c for c in calls if c is not None)}")
    if expected_calls is not None and calls_per_step is not None and calls_per_step != expected_calls:
        problems.append(f"allreduce calls per step {calls_per_step:g} != expected {expected_calls}")
    if not ranks:
        problems.append("no rank trace parsed")
    us = [r["allreduce_us_per_call"] for r in ranks if r.get("allreduce_us_per_call") is not None]
    steps = [r["step_ms_median"] for r in ranks if r.get("step_ms_median") is not None]
    return {
        "ok": not problems and len(shares) == len(ranks),
        "problems": problems,
        "ranks": ranks,
        "share_min": min(shares) if len(shares) == len(ranks) and shares else None,
        "share_max": max(shares) if len(shares) == len(ranks) and shares else None,
        "calls_per_step": calls_per_step,
        "expected_calls_per_step": expected_calls,
        "us_per_call_min": min(us) if us else None,
        "step_ms_median": _median(steps),
    }


# ---------------------------------------------------------------------- measurement

def _trace_files(trace_dir: Path) -> set[Path]:
    if not trace_dir.is_dir():
        return set()
    return {p for p in trace_dir.iterdir()
            if p.is_file() and p.name.endswith(TRACE_GLOB_SUFFIXES) and "async_llm" not in p.name}


def _post(client: httpx.Client, url: str, what: str, **kw) -> httpx.Response:
    try:
        r = client.post(url, **kw)
    except httpx.HTTPError as e:
        raise ProbeError(f"{what}: no answer from {url}: {type(e).__name__}: {e}") from e
    if r.status_code == 404 and what.endswith("_profile"):
        raise ProbeError(f"{what}: 404 - the server was started without --profiler-config "
                         "(see profiler_engine_args)", r.text[:2000])
    if r.status_code >= 400:
        raise ProbeError(f"{what}: HTTP {r.status_code}", r.text[:2000])
    return r


def _stream_completion(client: httpx.Client, base: str, model: str, prompt: str, max_tokens: int,
                       timeout_s: float) -> dict:
    body = {
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }
    url = f"{base}/v1/completions"
    chunks, usage, finish, done = 0, None, None, False
    t0 = time.perf_counter()
    try:
        with client.stream("POST", url, json=body, timeout=httpx.Timeout(timeout_s, connect=10.0)) as r:
            if r.status_code >= 400:
                r.read()
                raise ProbeError(f"completion: HTTP {r.status_code}", r.text[:2000])
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                try:
                    obj = json.loads(payload)
                except ValueError as e:
                    raise ProbeError("completion: malformed SSE JSON", payload[:2000]) from e
                if "error" in obj:
                    raise ProbeError("completion: error in stream", obj)
                if obj.get("usage"):
                    usage = obj["usage"]
                for c in obj.get("choices") or []:
                    chunks += 1
                    finish = c.get("finish_reason") or finish
    except httpx.HTTPError as e:
        raise ProbeError(f"completion: {type(e).__name__}: {e}") from e
    n = (usage or {}).get("completion_tokens")
    if not done:
        raise ProbeError("completion: stream ended without data: [DONE]")
    if n != max_tokens:
        raise ProbeError(f"completion: {n} tokens generated, expected {max_tokens}", usage)
    return {"completion_tokens": n, "chunks": chunks, "finish_reason": finish,
            "seconds": round(time.perf_counter() - t0, 4)}


def _wait_for_traces(trace_dir: Path, before: set[Path], prefix: str, deadline: float,
                     expected_ranks: int | None) -> dict[Path, dict]:
    """New trace files of this session, each parsed once complete: {path: parsed}."""
    parsed: dict[Path, dict] = {}
    last_error: dict[Path, str] = {}
    stable_since, last_set = None, None
    while True:
        new = _trace_files(trace_dir) - before
        mine = {p for p in new if p.name.startswith(prefix + "_")} or new  # old vLLM: no prefix
        for p in sorted(mine - set(parsed)):
            try:
                parsed[p] = parse_trace(p)
            except TraceError as e:  # still being written
                last_error[p] = str(e)
        now = time.monotonic()
        if mine != last_set:
            last_set, stable_since = set(mine), now
        complete = bool(mine) and set(parsed) == mine
        if complete and (len(mine) >= expected_ranks if expected_ranks else now - stable_since >= 2.0):
            return parsed
        if now >= deadline:
            detail = "; ".join(last_error.get(p, "") for p in mine - set(parsed))
            raise ProbeError(
                f"profiler traces not complete in time: {len(parsed)} parsed of {len(mine)} new file(s) "
                f"in {trace_dir}" + (f", expected {expected_ranks}" if expected_ranks else "")
                + (f" ({detail})" if detail else ""))
        time.sleep(0.5)


def measure_allreduce_share(*, base_url: str, model: str, trace_dir: Path, prompt: str, max_tokens: int = 64,
                            timeout_s: float = 300, client: httpx.Client | None = None,
                            expected_ranks: int | None = None, expected_calls: int | None = None) -> dict:
    """Profile one greedy streamed request of MAX_TOKENS and return the allreduce share.

    TRACE_DIR must be the directory given to `profiler_engine_args` for this server (same
    machine). Returns `aggregate(...)` plus `request`, `trace_files`, `profile_prefix`,
    `stop_profile_s`. Raises ProbeError when the server does not answer properly or the
    traces never appear; implausible figures go to `problems` instead.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ValueError(f"max_tokens must be an integer >= 2, got {max_tokens!r}")
    trace_dir = Path(trace_dir).expanduser().resolve()
    base = base_url.rstrip("/")
    own = client is None
    if own:
        client = httpx.Client(trust_env=False, timeout=httpx.Timeout(timeout_s, connect=10.0))
    deadline = time.monotonic() + timeout_s
    prefix = "ar" + time.strftime("%Y%m%d%H%M%S") + uuid.uuid4().hex[:8]
    try:
        before = _trace_files(trace_dir)
        _post(client, f"{base}/start_profile", "start_profile", json={"profile_prefix": prefix},
              timeout=max(1.0, deadline - time.monotonic()))
        try:
            request = _stream_completion(client, base, model, prompt, max_tokens,
                                         max(1.0, deadline - time.monotonic()))
        except BaseException:
            try:  # never leave the profiler running; the request's error is the one to raise
                _post(client, f"{base}/stop_profile", "stop_profile", timeout=max(5.0, deadline - time.monotonic()))
            except ProbeError:
                pass
            raise
        t_stop = time.monotonic()
        _post(client, f"{base}/stop_profile", "stop_profile", timeout=max(5.0, deadline - time.monotonic()))
        stop_s = time.monotonic() - t_stop
        parsed = _wait_for_traces(trace_dir, before, prefix, deadline, expected_ranks)
    finally:
        if own:
            client.close()
    ranks = sorted(parsed.values(), key=lambda r: (r["rank"] is None, r["rank"], r["file"]))
    out = aggregate(ranks, expected_calls=expected_calls)
    if expected_ranks and len(ranks) != expected_ranks:
        out["problems"].append(f"{len(ranks)} rank trace(s), expected {expected_ranks}")
        out["ok"] = False
    for r in ranks:  # one request: the prefill step makes token 1, each decode step one more
        if r["decode_steps"] and r["decode_steps"] != max_tokens - 1:
            out["problems"].append(
                f"rank {r['rank']}: {r['decode_steps']} decode steps for {max_tokens} tokens, expected "
                f"{max_tokens - 1} (another request running, speculative decoding, or steps not recorded)")
            out["ok"] = False
    out.update({
        "request": request,
        "trace_dir": str(trace_dir),
        "trace_files": [str(p) for p in sorted(parsed)],
        "profile_prefix": prefix,
        "stop_profile_s": round(stop_s, 3),
    })
    return out

