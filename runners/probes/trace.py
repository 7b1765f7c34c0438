"""Parsing one rank's torch profiler trace (Chrome trace JSON, as written by torch/kineto):
how long each decode step spent in tensor-parallel allreduce. The probe that produces the
traces is runners/probes/allreduce.py.

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

Reading: `parse_trace` streams the file (ijson) and keeps only the events named above (device
events, launches, step annotations, communication-named ops), so a trace of hundreds of MB is
never held whole; figures in docs/methods/artifact-memory.md (benchmarks/trace_memory.py).

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
launch_gap_us_per_step_median and launch_gap_share (GPU, steps timed by their kernel span: the
span minus the union of its kernels, i.e. the device idle between kernels; None elsewhere),
allgather_calls_per_step, allgather_calls_per_step_set, allgather_us_per_call,
allreduce_names, allgather_names, comm_names_seen {name: count}, file, rank.
"""
from __future__ import annotations

import bisect
import gzip
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import ijson

from runners.analysis import stats

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

RANK_RE = re.compile(r"(?:^|_)rank(\d+)(?:\.|_|$)")


class TraceError(ValueError):
    """A trace file cannot be read (not gzip/JSON, no traceEvents)."""

# What a broken file raises while it is read: gzip (cut or corrupt) or JSON (cut, invalid).
READ_ERRORS = (OSError, EOFError, zlib.error, ValueError, UnicodeDecodeError, ijson.JSONError)


def _open(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when gzip (torch writes .json.gz with gzip on)."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else path.open("rb")


def _events_prefix(path: Path) -> str:
    """ijson's path to the events: a top-level list holds them itself (older Chrome traces)."""
    with _open(path) as f:
        head = f.read(4096).lstrip()
    return "item" if head[:1] == b"[" else "traceEvents.item"


def _has_events_list(path: Path) -> bool:
    with _open(path) as f:
        return any(p == "traceEvents" and ev == "start_array" for p, ev, _ in ijson.parse(f))


def iter_trace_events(path: Path) -> Iterator[Any]:
    """The raw events of a Chrome trace (.json or .json.gz), one at a time: a GPU trace is
    hundreds of MB, so the file is streamed and never held whole. The rest of the file is still
    parsed, so a cut or invalid file raises TraceError (by the end of the iteration)."""
    path = Path(path)
    try:
        prefix, count = _events_prefix(path), 0
        with _open(path) as f:
            for count, event in enumerate(ijson.items(f, prefix, use_float=True), 1):
                yield event
        found = count or prefix == "item" or _has_events_list(path)
    except READ_ERRORS as e:
        raise TraceError(f"{path.name}: not a complete trace ({type(e).__name__}: {e})") from e
    if not found:
        raise TraceError(f"{path.name}: no traceEvents list")


def load_trace(path: Path) -> dict:
    """The whole trace in memory, for small files and tests (parse_trace streams instead).
    Raise TraceError when incomplete or invalid."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except READ_ERRORS as e:
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
    return stats.median(xs) if xs else None


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


# ------------------------------------------------------------------------- parsing
def parse_trace(path: Path) -> dict:
    """Parse one rank's trace file; see the module doc. Never raises on odd content:
    an unreadable file raises TraceError, anything else goes to `problems`."""
    path = Path(path)
    result = parse_events(filter(_needed, iter_trace_events(path)))
    result["file"] = path.name
    m = RANK_RE.search(path.name)
    result["rank"] = int(m.group(1)) if m else None
    return result


def _needed(e: Any) -> bool:
    """Whether any step below reads this raw event: device events, launches, step annotations
    and communication-named ops. The rest (python_function, most cpu_ops) is most of a trace."""
    if not isinstance(e, dict) or e.get("ph") != "X":
        return False
    cat = str(e.get("cat", ""))
    if cat in KERNEL_CATS or cat in LAUNCH_CATS:
        return True
    name = str(e.get("name", ""))
    if cat in ("user_annotation", "gpu_user_annotation") and STEP_RE.match(name):
        return True
    return cat in ("cpu_op", "user_annotation") and COMM_NAME_RE.search(name) is not None


def parse_events(raw_events: Iterable) -> dict:
    """The figures of one rank from its raw trace events (see the module doc)."""
    events = _timed_events(raw_events)
    found = _find_steps(events)
    comm = _find_comm(events)
    source = _source(comm)
    steps = [_Step(s) for s in found.decode]
    problems: list[str] = []
    launch_us: list[float] = []
    if source == "kernel":
        _attribute_kernels(steps, events, comm, found.gpu_annotations, problems)
    else:
        launch_us = _attribute_cpu_calls(steps, comm)
    fig = _Figures.of(steps, source)
    share = _check(fig, steps, found, comm, problems)
    return _result(fig, steps, found, comm, source, share, problems, launch_us)


def _timed_events(raw_events: Iterable) -> list[_Ev]:
    """Complete events (ph X) with a time and a non-negative duration. Names are shared: a
    GPU trace repeats a few long kernel names hundreds of thousands of times."""
    events, names = [], {}
    for e in raw_events:
        if isinstance(e, dict) and e.get("ph") == "X":
            ev = _Ev(e)
            if ev.ts is not None and ev.dur is not None and ev.dur >= 0:
                ev.name = names.setdefault(ev.name, ev.name)
                events.append(ev)
    return events


@dataclass
class _Found:
    all_steps: list = field(default_factory=list)   # every execute_* annotation (CPU)
    decode: list = field(default_factory=list)      # the decode ones, by start time
    names: dict = field(default_factory=dict)       # decode step name -> count
    gpu_annotations: dict = field(default_factory=dict)  # step name -> its gpu_user_annotations


def _find_steps(events: list[_Ev]) -> _Found:
    found = _Found()
    for ev in events:
        m = STEP_RE.match(ev.name)
        if not m:
            continue
        if ev.cat == "gpu_user_annotation":
            found.gpu_annotations.setdefault(ev.name, []).append(ev)
        elif ev.cat == "user_annotation":
            found.all_steps.append(ev)
            if int(m.group("ctx")) == 0 and int(m.group("gen")) >= 1:
                found.decode.append(ev)
                found.names[ev.name] = found.names.get(ev.name, 0) + 1
    found.decode.sort(key=lambda e: e.ts)
    return found


@dataclass
class _Comm:
    kernels: list   # every device event (kernel, memcpy, memset)
    k_ar: list      # allreduce kernels
    k_ag: list      # all_gather kernels
    c_ar: list      # allreduce CPU ops
    c_ag: list      # all_gather CPU ops
    g_ar: list      # gloo allreduce work (run-loop threads)
    g_ag: list      # gloo all_gather work
    names: dict     # communication-like event name -> count


def _find_comm(events: list[_Ev]) -> _Comm:
    kernels = [e for e in events if e.cat in KERNEL_CATS]
    cpu_ops = [e for e in events if e.cat == "cpu_op"]
    annotated = [e for e in events if e.cat in ("cpu_op", "user_annotation")]
    names: dict[str, int] = {}
    for e in events:
        if e.cat in ("kernel", "cpu_op", "user_annotation") and COMM_NAME_RE.search(e.name) \
                and not STEP_RE.match(e.name):
            names[e.name] = names.get(e.name, 0) + 1
    return _Comm(
        kernels=kernels,
        k_ar=[e for e in kernels if e.cat == "kernel" and KERNEL_ALLREDUCE_RE.search(e.name)],
        k_ag=[e for e in kernels if e.cat == "kernel" and KERNEL_ALLGATHER_RE.search(e.name)
              and not KERNEL_ALLREDUCE_RE.search(e.name)],
        c_ar=[e for e in cpu_ops if CPU_ALLREDUCE_RE.search(e.name)],
        c_ag=[e for e in cpu_ops if CPU_ALLGATHER_RE.search(e.name)],
        g_ar=[e for e in annotated if GLOO_ALLREDUCE_RE.search(e.name)],
        g_ag=[e for e in annotated if GLOO_ALLGATHER_RE.search(e.name)],
        names=names,
    )


def _source(comm: _Comm) -> str:
    """Where the allreduce time is read: device kernels, CPU ops, or CPU ops + gloo work."""
    if comm.k_ar or (comm.kernels and not comm.c_ar):
        return "kernel"
    return "cpu_op+gloo" if comm.g_ar else "cpu_op"


class _Step:
    """One decode step: its CPU annotation and what was attributed to it."""
    __slots__ = ("name", "pid", "tid", "ts", "end", "cpu_us", "ar", "ag", "kernels", "step_us", "basis")

    def __init__(self, ann: _Ev):
        self.name, self.pid, self.tid, self.ts, self.end = ann.name, ann.pid, ann.tid, ann.ts, ann.end
        self.cpu_us = ann.dur
        self.ar: list = []
        self.ag: list = []
        self.kernels: list = []
        self.step_us, self.basis = ann.dur, "cpu_annotation"


def _containing(starts: list[float], steps: list[_Step], ts: float, end: float, pid=None) -> int | None:
    """Index of the step whose window contains [ts, end] (steps sorted by start, disjoint per pid)."""
    i = bisect.bisect_right(starts, ts) - 1
    while i >= 0:
        s = steps[i]
        if s.ts <= ts and end <= s.end + 1e-3 and (pid is None or s.pid == pid):
            return i
        if s.ts < ts - 60e6:  # look back at most a minute (overlapping pids)
            break
        i -= 1
    return None


# ------------------------------------------------------------------- attribution
def _attribute_cpu_calls(steps: list[_Step], comm: _Comm) -> list[float]:
    """CPU ops (with their gloo work) to the step that contains their start; returns the
    allreduce launch times (the op on the worker thread alone)."""
    starts = [s.ts for s in steps]
    launch_us = []
    for kind, ops, async_work in (("ar", comm.c_ar, comm.g_ar), ("ag", comm.c_ag, comm.g_ag)):
        for call in _with_async_work(_outermost(ops), async_work):
            i = _containing(starts, steps, call.ts, call.ts, call.pid)
            if i is not None:
                getattr(steps[i], kind).append(call)
                if kind == "ar":
                    launch_us.append(call.launch_us)
    return launch_us


class _KernelSteps:
    """Ties a device kernel to its decode step: by the correlation id of its launch, else by
    the step's gpu_user_annotation window."""

    def __init__(self, steps: list[_Step], events: list[_Ev], gpu_annotations: dict):
        self.steps, self.starts = steps, [s.ts for s in steps]
        self.launches = {e.corr: e for e in events if e.cat in LAUNCH_CATS and e.corr is not None}
        self.gpu_window = _pair_gpu_windows(steps, gpu_annotations)
        self.by_start = sorted(self.gpu_window.items(), key=lambda p: p[1].ts)

    def step_of(self, k: _Ev) -> int | None:
        launch = self.launches.get(k.corr) if k.corr is not None else None
        if launch is not None:
            return _containing(self.starts, self.steps, launch.ts, launch.ts, launch.pid)
        for i, g in self.by_start:
            if g.ts <= k.ts and k.end <= g.end + 1e-3:
                return i
        return None

    def during_decode(self, e: _Ev) -> bool:
        if not self.steps:
            return False
        lo = min(s.ts for s in self.steps)
        hi = max([s.end for s in self.steps] + [g.end for g in self.gpu_window.values()])
        return lo <= e.ts <= hi


def _pair_gpu_windows(steps: list[_Step], gpu_annotations: dict) -> dict[int, _Ev]:
    """{step index: its gpu_user_annotation}, paired in order by name when the counts match."""
    by_name: dict[str, list[int]] = {}
    for i, s in enumerate(steps):
        by_name.setdefault(s.name, []).append(i)
    pairs = {}
    for name, idxs in by_name.items():
        anns = sorted(gpu_annotations.get(name, []), key=lambda e: e.ts)
        if len(anns) == len(idxs):
            pairs.update(zip(idxs, anns))
    return pairs


def _attribute_kernels(steps: list[_Step], events: list[_Ev], comm: _Comm, gpu_annotations: dict,
                       problems: list[str]) -> None:
    """Kernels to steps; each step's time becomes its device window (see the module doc)."""
    tie = _KernelSteps(steps, events, gpu_annotations)
    for k in comm.kernels:
        i = tie.step_of(k)
        if i is not None:
            steps[i].kernels.append(k)
    unattributed = 0
    for kind, kernels in (("ar", comm.k_ar), ("ag", comm.k_ag)):
        for e in kernels:
            i = tie.step_of(e)
            if i is not None:
                getattr(steps[i], kind).append(e)
            elif kind == "ar" and tie.during_decode(e):
                unattributed += 1
    for i, s in enumerate(steps):
        if s.kernels:
            s.step_us = max(k.end for k in s.kernels) - min(k.ts for k in s.kernels)
            s.basis = "kernel_span"
        elif i in tie.gpu_window:
            s.step_us, s.basis = tie.gpu_window[i].dur, "gpu_annotation"
    if unattributed:
        problems.append(f"{unattributed} allreduce kernel(s) during decode could not be tied to a step "
                        "(no correlation with a launch inside a step, no gpu_user_annotation)")


# -------------------------------------------------------------- figures and checks
@dataclass
class _Figures:
    ar_counts: list       # allreduce calls, per step
    ar_us: list           # allreduce time (union of the calls), per step
    ag_counts: list       # all_gather calls, per step
    step_us: list         # step time (the share's denominator), per step
    per_call_us: list     # every allreduce call's duration
    ag_call_us: list      # every all_gather call's duration
    over_steps: int       # steps whose allreduce time exceeds the step time
    outside: int          # CPU calls whose (gloo) work ends after their step
    periods: list         # step start to next step start

    @classmethod
    def of(cls, steps: list[_Step], source: str) -> "_Figures":
        f = cls([], [], [], [], [], [], 0, 0, [b.ts - a.ts for a, b in zip(steps, steps[1:])])
        for s in steps:
            if source != "kernel":
                f.outside += sum(1 for c in s.ar if c.end > s.end + STEP_TOLERANCE_US)
            ar_time = _union_us(s.ar)
            f.ar_counts.append(len(s.ar))
            f.ar_us.append(ar_time)
            f.ag_counts.append(len(s.ag))
            f.per_call_us += [e.dur for e in s.ar]
            f.ag_call_us += [e.dur for e in s.ag]
            f.step_us.append(s.step_us)
            if ar_time > s.step_us * (1 + STEP_TOLERANCE_REL) + STEP_TOLERANCE_US:
                f.over_steps += 1
        return f

    @property
    def share(self) -> float | None:
        total = sum(self.step_us)
        return sum(self.ar_us) / total if total > 0 else None


def _check(fig: _Figures, steps: list[_Step], found: _Found, comm: _Comm, problems: list[str]) -> float | None:
    """Append the sanity-check failures to PROBLEMS; the share, or None when it cannot be trusted."""
    share = fig.share
    if not steps:
        problems.append("no decode steps (user_annotation execute_context_0(..)_generation_N(..)) in the trace"
                        + (f"; {len(found.all_steps)} prefill/mixed step(s) seen" if found.all_steps else ""))
        share = None
    if fig.over_steps:
        problems.append(f"allreduce time exceeds the step time in {fig.over_steps} of {len(steps)} decode steps")
        share = None
    if fig.outside:
        problems.append(f"{fig.outside} allreduce call(s) (with their gloo work) end after their decode step")
        share = None
    if share is not None and not 0.0 <= share <= 1.0:
        problems.append(f"allreduce share {share:.4f} outside [0, 1]")
        share = None
    _check_call_counts(fig.ar_counts, problems)
    if steps and not any(fig.ar_counts):
        problems.append("no allreduce events inside decode steps (TP=1, or an allreduce implementation "
                        f"this parser does not know; communication-like names seen: {sorted(comm.names) or 'none'})")
    return share


def _check_call_counts(counts: list[int], problems: list[str]) -> None:
    """Every decode step makes the same allreduces: more than ~10 % odd steps is a problem."""
    distinct = sorted(set(counts))
    if len(distinct) <= 1:
        return
    mode = max(distinct, key=counts.count)
    odd = sum(1 for c in counts if c != mode)
    if odd > max(1, len(counts) // 10):
        problems.append(f"allreduce calls per step vary: {distinct} (mode {mode}, {odd} steps differ)")


def _warnings(share: float | None) -> list[str]:
    if share is None or share <= SUSPECT_SHARE:
        return []
    return [f"allreduce share {share:.2f} is suspiciously high: the time includes waiting for the slower "
            "rank (and, under CUDA graphs, replay timing artefacts); compare ranks and an A/B measurement"]


def _kernel_share(fig: _Figures, steps: list[_Step], source: str) -> float | None:
    """GPU: allreduce time over busy kernel time (the union of each step's kernels)."""
    if source != "kernel" or not steps:
        return None
    busy = sum(_union_us(s.kernels) for s in steps)
    return sum(fig.ar_us) / busy if busy > 0 else None


def _launch_gaps(steps: list[_Step], source: str) -> list[float]:
    """GPU: per decode step measured by its kernel span, the time inside the span when no kernel
    ran (the device waiting for the host to launch the next one): span minus busy time."""
    if source != "kernel":
        return []
    return [max(0.0, s.step_us - _union_us(s.kernels)) for s in steps if s.basis == "kernel_span" and s.kernels]


def _result(fig: _Figures, steps: list[_Step], found: _Found, comm: _Comm, source: str,
            share: float | None, problems: list[str], launch_us: list[float]) -> dict:
    on_device = source == "kernel"
    gaps = _launch_gaps(steps, source)
    return {
        "ok": not problems,
        "problems": problems,
        "warnings": _warnings(share),
        "source": source,
        "decode_steps": len(steps),
        "other_steps": len(found.all_steps) - len(steps),  # prefill, mixed, empty
        "step_names": found.names,
        "step_basis": sorted({s.basis for s in steps}),
        "step_ms_median": _ms(_median(fig.step_us)),
        "cpu_step_ms_median": _ms(_median([s.cpu_us for s in steps])),
        "step_period_ms_median": _ms(_median(fig.periods)),
        "allreduce_calls_per_step": stats.median_low(fig.ar_counts) if fig.ar_counts else None,
        "allreduce_calls_per_step_set": sorted(set(fig.ar_counts)),
        "allreduce_us_per_call": _round(_median(fig.per_call_us)),
        "allreduce_us_per_step_median": _round(_median(fig.ar_us)),
        "allreduce_launch_us_per_call": _round(_median(launch_us)),
        "allreduce_total_us": _round(sum(fig.ar_us)),
        "decode_step_total_us": _round(sum(fig.step_us)),
        "allreduce_share": _round(share, 6),
        "kernel_time_share": _round(_kernel_share(fig, steps, source), 6),
        "launch_gap_us_per_step_median": _round(_median(gaps)),
        "launch_gap_share": _round(sum(gaps) / sum(fig.step_us), 6) if gaps and sum(fig.step_us) > 0 else None,
        "allgather_calls_per_step": stats.median_low(fig.ag_counts) if fig.ag_counts else None,
        "allgather_calls_per_step_set": sorted(set(fig.ag_counts)),
        "allgather_us_per_call": _round(_median(fig.ag_call_us)),
        "allreduce_names": sorted({e.name for e in (comm.k_ar if on_device else comm.c_ar + comm.g_ar)}),
        "allgather_names": sorted({e.name for e in (comm.k_ag if on_device else comm.c_ag + comm.g_ag)}),
        "comm_names_seen": comm.names,
    }


def _ms(us: float | None) -> float | None:
    return None if us is None else round(us / 1000.0, 4)


def _round(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)
