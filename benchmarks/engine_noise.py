"""Which part of a decode figure's noise is the engine's and which the probe's, per engine start.

    .venv/bin/python benchmarks/engine_noise.py [--starts 3] [--repeats 5] [--max-tokens 256]
        [--engine-args "..."] [--model var/tiny-model] [--pin] [--record DIR] [--json out.json]

Each start runs `vllm serve` once and then, after one warmup request, one or two phases:

- `free`: the processes where the OS put them;
- `pinned` (with --pin): the engine core and the API server each pinned to two CPUs of their
  own, this client to a fifth (distinct physical cores where the topology says so), all threads.

In each phase it makes REPEATS probe repeats and REPEATS requests of a plain client (a minimal
reader of the stream, timed per network read, as benchmarks/observer_effect.py), alternating,
and for every request reads the engine's own mean ITL from /metrics before and after it. Per
repeat it reports the probe's steady-window rate, the whole stream's rate, the engine's rate
(1 / its mean ITL), and for the plain client its whole-stream rate; and before each request the
host's single-core speed (a fixed Python loop) and the CPU time a hypervisor stole during it
(runners.probes.host). Per phase the GPU's SM clock (nvidia-smi, sampled during the phase).
Together they tell a host that slows down from an engine that does.

--record DIR writes the raw chunk arrivals of some requests (probe requests of the first start's
first phase; with --held-back also requests read through a relay that leaves Nagle on, which
holds the first chunks back) as JSON fixtures: {"t_send", "chunks": [{"t", "k"}], "n_tokens"},
times in seconds from the request's send.

The summary gives, per phase kind, the CV across starts of the probe's median, of the plain
client's median and of the engine's rate, and the CV within starts.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.decode_noise import ENGINE_ARGS, PROMPT, cv  # noqa: E402 (the tiny engine's settings)
from benchmarks.observer_effect import plain_stream, user_request  # noqa: E402
from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes import decode, host, streamed_request  # noqa: E402
from runners.probes.client import CompletionClient  # noqa: E402
from runners.probes.metrics import hist_delta, scrape_server_metrics, settled_metrics  # noqa: E402


class SmClock:
    """nvidia-smi's SM clock, sampled every 200 ms while the context is open (None without it)."""

    def __enter__(self):
        self.samples: list[float] = []
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                                          "-lms", "200", "-i", "0"], stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
            return self
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append(float(line.strip()))
            except ValueError:
                pass

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()

    def mean(self) -> float | None:
        return statistics.mean(self.samples) if self.samples else None


def distinct_core_cpus(n: int) -> list[int]:
    """N allowed CPUs on distinct physical cores (by sysfs topology), avoiding CPU 0's core."""
    allowed = sorted(os.sched_getaffinity(0))
    seen, out = set(), []
    for cpu in allowed:
        try:
            core = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        except OSError:
            core = str(cpu)
        if core in seen or (cpu == 0 and len(allowed) > n):
            seen.add(core)
            continue
        seen.add(core)
        out.append(cpu)
    return (out + allowed)[:n]


def engine_processes(engine: Engine) -> dict[str, int]:
    """{'api': pid, 'core': pid} of the engine's process group (the API server is the `vllm`
    command itself; the engine core is the process named VLLM::EngineCore)."""
    import psutil

    found: dict[str, int] = {}
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if os.getpgid(p.pid) != engine.pgid:
                continue
        except OSError:
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if "EngineCore" in (p.info["name"] or "") or "EngineCore" in cmd:
            found["core"] = p.pid
        elif "serve" in cmd:
            found["api"] = p.pid
    return found


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of PID onto CPUS."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


class NagleRelay:
    """A loopback relay to UPSTREAM that leaves Nagle on towards the client: the first small
    writes after the response headers wait for the client's delayed ACK, as behind a proxy
    without TCP_NODELAY (a held-back start, for --held-back recordings)."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.sock.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
            up = socket.create_connection(self.upstream)
            up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for a, b in ((client, up), (up, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def engine_itl_ms(api: CompletionClient, model: str, before: dict) -> float | None:
    after = settled_metrics(api, model, before, 1)
    d = hist_delta(before, after, "itl") if after.get("available") else None
    return 1e3 * d[0] / d[1] if d and d[1] else None


def raw_streams(base_url: str, model: str, max_tokens: int, n: int) -> list[dict]:
    """N probe requests' raw records on one connection after one unrecorded request (a new
    connection's first segments are ACKed at once: quick-ACK mode), times relative to the send."""
    body = streamed_request.request_body(model, PROMPT, max_tokens)
    out = []
    with CompletionClient(base_url, timeout_s=120) as api:
        for j in range(n + 1):
            rec = streamed_request.stream_once(api, body, 120)
            t0 = rec["t_send"]
            if j:
                out.append({"t_send": 0.0, "n_tokens": rec["n_tokens"],
                            "chunks": [{"t": round(c["t"] - t0, 7), "k": c["k"]} for c in rec["chunks"]]})
    return out


def phase(api: CompletionClient, base_url: str, model: str, *, repeats: int, max_tokens: int) -> dict:
    """REPEATS probe repeats and REPEATS plain requests, alternating, each with the engine's ITL."""
    probe, plain = [], []
    with SmClock() as clock:
        for _ in range(repeats):
            before = scrape_server_metrics(api, model=model)
            r = decode.measure_decode(base_url=base_url, model=model, prompt=PROMPT, max_tokens=max_tokens,
                                      repeats=1, warmup=0, client=api.http)
            s = r["samples"][0]
            itl = engine_itl_ms(api, model, before)
            probe.append({"window_tok_s": s["decode_tok_s"], "whole_tok_s": s["whole_stream_tok_s"],
                          "engine_tok_s": 1e3 / itl if itl else None, "flag": s["flag"],
                          "held_back": s["held_back"], "host_loop_ms": s["host_loop_ms"],
                          "host_steal": s["host_steal"]})
            before, h0 = scrape_server_metrics(api, model=model), host.sample()
            p = plain_stream(api.http, api.url("/v1/completions"), user_request(model, max_tokens))
            h1 = host.sample()
            itl = engine_itl_ms(api, model, before)
            plain.append({"whole_tok_s": p["tok_s"], "engine_tok_s": 1e3 / itl if itl else None,
                          "host_loop_ms": h0["loop_ms"], "host_steal": host.steal_between(h0, h1)})
    loops = [x["host_loop_ms"] for x in probe + plain]
    return {"host_loop_ms": [min(loops), max(loops)], "sm_clock_mhz": clock.mean(), "probe": probe, "plain": plain,
            "probe_median": statistics.median(x["window_tok_s"] for x in probe if x["window_tok_s"]),
            "plain_median": statistics.median(x["whole_tok_s"] for x in plain),
            "engine_median": _median([x["engine_tok_s"] for x in probe + plain]),
            "trimmed": sum(1 for x in probe if x["held_back"]), "flagged": sum(1 for x in probe if x["flag"])}


def _median(xs):
    xs = [x for x in xs if x]
    return statistics.median(xs) if xs else None


def one_start(i: int, a, log_dir: Path) -> dict:
    spec = EngineSpec(model=a.model, tensor_parallel_size=a.tp, args=shlex.split(a.engine_args),
                      log_path=log_dir / f"start-{i}.log", startup_timeout_s=a.startup_timeout)
    t0 = time.perf_counter()
    out: dict = {"start": i}
    with Engine(spec) as engine:
        out["startup_s"] = time.perf_counter() - t0
        model = spec.served_model_name
        with CompletionClient(engine.base_url, timeout_s=120) as api:
            plain_stream(api.http, api.url("/v1/completions"), user_request(model, a.max_tokens))  # warmup
            if a.record and i == 0:
                rec = Path(a.record)
                rec.mkdir(parents=True, exist_ok=True)
                for j, r in enumerate(raw_streams(engine.base_url, model, a.max_tokens, 2)):
                    (rec / f"{a.label}-{j}.json").write_text(json.dumps(r))
                if a.held_back:
                    relay = NagleRelay(("127.0.0.1", engine.port))
                    for j, r in enumerate(raw_streams(f"http://127.0.0.1:{relay.port}", model, a.max_tokens, 3)):
                        (rec / f"{a.label}-held-back-{j}.json").write_text(json.dumps(r))
            out["free"] = phase(api, engine.base_url, model, repeats=a.repeats, max_tokens=a.max_tokens)
            _say(i, "free", out["free"])
            if a.pin:
                procs = engine_processes(engine)
                cpus = distinct_core_cpus(5)
                if "core" in procs:
                    pin(procs["core"], set(cpus[0:2]))
                if "api" in procs:
                    pin(procs["api"], set(cpus[2:4]))
                os.sched_setaffinity(0, {cpus[4]})
                out["pinning"] = {"processes": procs, "cpus": cpus}
                out["pinned"] = phase(api, engine.base_url, model, repeats=a.repeats, max_tokens=a.max_tokens)
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
                _say(i, "pinned", out["pinned"])
    return out


def _say(i: int, kind: str, p: dict) -> None:
    eng = f"{p['engine_median']:.2f}" if p["engine_median"] else "-"
    clock = f"{p['sm_clock_mhz']:.0f}" if p["sm_clock_mhz"] else "-"
    print(f"start {i} {kind:6} probe {p['probe_median']:8.2f}  plain {p['plain_median']:8.2f}  engine {eng:>8}  "
          f"whole/window per repeat " + " ".join(f"{x['whole_tok_s']:.1f}/{x['window_tok_s']:.1f}" for x in p["probe"])
          + f"  trimmed {p['trimmed']}  loop {p['host_loop_ms'][0]:.1f}-{p['host_loop_ms'][1]:.1f} ms  sm {clock} MHz",
          flush=True)


def summarize(starts: list[dict]) -> dict:
    out = {}
    for kind in ("free", "pinned"):
        phases = [s[kind] for s in starts if kind in s]
        if not phases:
            continue
        within = [cv([x["whole_tok_s"] for x in p["plain"]]) for p in phases]
        out[kind] = {
            "starts": len(phases),
            "probe_medians": [p["probe_median"] for p in phases],
            "cv_probe_across_starts": cv([p["probe_median"] for p in phases]),
            "cv_plain_across_starts": cv([p["plain_median"] for p in phases]),
            "cv_engine_across_starts": cv([p["engine_median"] for p in phases if p["engine_median"]]),
            "cv_within_starts_median": statistics.median(w for w in within if w is not None) if phases else None,
            "probe_vs_plain": [p["probe_median"] / p["plain_median"] - 1 for p in phases],
            "trimmed": sum(p["trimmed"] for p in phases), "flagged": sum(p["flagged"] for p in phases),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--engine-args", default=shlex.join(ENGINE_ARGS), help="flags for vllm serve, one string")
    ap.add_argument("--startup-timeout", type=float, default=600)
    ap.add_argument("--pin", action="store_true", help="a second phase with engine, API server and client pinned")
    ap.add_argument("--record", metavar="DIR", help="write raw streams of the first start as fixtures")
    ap.add_argument("--held-back", action="store_true", help="with --record: also through a Nagle relay")
    ap.add_argument("--label", default="stream", help="fixture file name prefix")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    starts = []
    with tempfile.TemporaryDirectory(prefix="engine-noise-") as tmp:
        for i in range(a.starts):
            starts.append(one_start(i, a, Path(tmp)))
            if a.json:  # after every start: a call cut short keeps what it measured
                a.json.write_text(json.dumps({"args": vars(a) | {"json": str(a.json)}, "starts": starts,
                                              "summary": summarize(starts)}, indent=1, default=str))
    summary = summarize(starts)
    for kind, s in summary.items():
        print(f"{kind}: CV across {s['starts']} starts: probe {_pct(s['cv_probe_across_starts'])}, plain "
              f"{_pct(s['cv_plain_across_starts'])}, engine {_pct(s['cv_engine_across_starts'])}; within a start "
              f"(plain) {_pct(s['cv_within_starts_median'])}; probe vs plain "
              + " ".join(f"{100 * x:+.2f}%" for x in s["probe_vs_plain"])
              + f"; repeats trimmed {s['trimmed']}, flagged {s['flagged']}")
    return 0


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


if __name__ == "__main__":
    sys.exit(main())
