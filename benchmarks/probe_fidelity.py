"""Probe fidelity: our decode probe and `vllm bench serve` against the same exact-cadence server.

    .venv/bin/python benchmarks/probe_fidelity.py [--json out.json]

For each case (token cadence 5 ms / 17 ms, 1 / 3 tokens per chunk) the fake vLLM server
tests/runners/probes/token_server.py (its own process, one for the whole run) emits tokens on an exact
schedule and records the TRUE send time of every chunk. The SAME scenario URL is then measured
by

  (a) our probe, runners.probes.decode.measure_decode (in this process; 1 warmup + R repeats),
  (b) `vllm bench serve --backend vllm ... --num-prompts R --max-concurrency 1` (a subprocess),

and each tool's figures are compared with the truth computed from the server's records of the
requests THAT tool made (the probe's warmup is excluded; vllm bench sends no extra request with
its default `--ready-check-timeout-sec 0`, `--num-warmups 0`).

Definitions (the probe's, see runners/probes/decode.py and tests/runners/probes/test_decode.py):
  truth tok/s   per request (n - k_first) / (t_sent_last - t_sent_first); median over requests
  truth ITL     per token: a chunk of k tokens sent g after the previous one gives k samples of
                g / k; p50 pooled over requests. "per chunk": p50 of the gaps g themselves.
  vllm bench    tok/s = 1000 / median_tpot_ms (TPOT = (latency - ttft) / (output_tokens - 1), per
                request, i.e. per token, excluding the first token), compared with truth tok/s;
                output_throughput = all output tokens / benchmark duration, so it INCLUDES TTFT
                (and client gaps between requests): shown separately, it is not a decode rate.
                median_itl_ms is per streamed CHUNK: compared with the truth per-chunk gap.
  CPU/token     probe: time.process_time() delta around measure_decode (in-process, no import
                cost; the httpx client is made beforehand and its setup reported apart), divided
                by all tokens streamed (warmup included).
                vllm bench total: getrusage(RUSAGE_CHILDREN) user+sys delta around its subprocess
                (includes Python start, `import vllm`, tokenizer load, random dataset sampling),
                divided by the measured tokens: dominated by ~14 s of startup.
                vllm bench streaming only ("vb reqfunc"): vLLM's own request function
                (vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions, what
                `bench serve --backend vllm` runs per request) driven in ONE extra subprocess with an
                aiohttp session set up as serve.py does, 1 warmup + R sequential requests per case,
                time.process_time() around the R requests / their tokens: the same yardstick as the
                probe's figure. It leaves out serve.py's own per-request bookkeeping (small).
                Optional (--startup-run): subtract the CPU of a `--num-prompts 1
                --random-output-len 2` run from the total instead. Startup CPU varies by about 1 s
                run to run on a loaded 2-core host, against ~0.1-0.2 s of streaming, so that
                difference is noise (it came out negative): not used by default.

Held-back starts (--held-back, on by default): HELD_BACK_CASES run the same way against a
server that leaves TCP_NODELAY OFF (token_server.py `nodelay=0`) with a short first-token
delay, so its first small writes wait for the client's delayed ACK (about 40 ms on loopback)
and then arrive in one burst, as behind a proxy that does not set TCP_NODELAY. The server's
send times are then not when the bytes left, so the truth for these rows is the engine's
real rate: per request (n - 1) / (gen_last - gen_first) from the generation times, median over
requests (ITL truth: the generation gaps). Each tool is compared with it.

Drifting paces (--drift, on by default): DRIFT_CASES, TCP_NODELAY on, the gap between tokens
growing or shrinking linearly along the stream by 30-40% (token_server.py `drift`), as an eager
engine's pace does; the truth is the send times, the whole stream's rate.

The token server spins the last half millisecond before each token, so on a 2-core host the
server, this process and vllm bench compete; figures are from one run, not a distribution.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from runners.analysis import stats  # noqa: E402
from runners.probes.decode import measure_decode  # noqa: E402

SERVER = ROOT / "tests" / "runners" / "probes" / "token_server.py"
DEFAULT_TOKENIZER = ROOT / "var" / "tiny-model"
MODEL = "fake-model"
# (cadence_ms, tokens per chunk, max_tokens): about 0.65-0.85 s of decode per request
CASES = [(5, 1, 128), (17, 1, 48), (5, 3, 128), (17, 3, 48)]
# held-back starts (TCP_NODELAY off): (cadence_ms, tokens per chunk, max_tokens, ttft_ms)
HELD_BACK_CASES = [(2, 1, 128, 5), (2, 1, 128, 20), (5, 1, 128, 5)]
# drifting paces (TCP_NODELAY on): (cadence_ms at the start, tokens per chunk, max_tokens, drift);
# the gap grows (or shrinks) linearly by DRIFT along the stream, as an eager engine's does
DRIFT_CASES = [(20, 1, 128, 0.4), (5, 1, 128, 0.4), (5, 1, 128, -0.3)]
VLLM_TIMEOUT_S = 300


# ------------------------------------------------------------------------------ token server


class TokenServer:
    """tests/runners/probes/token_server.py in its own process (stderr discarded: it prints a traceback
    whenever a client resets an idle keep-alive connection, which vllm bench does)."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"token server did not start: {line!r}")
        self.root = f"http://127.0.0.1:{int(line.split()[1])}"

    def url(self, scenario: str) -> str:
        return f"{self.root}/s/{scenario}"

    def log(self, scenario: str) -> list[dict]:
        r = httpx.get(f"{self.root}/_log", params={"scenario": scenario}, trust_env=False, timeout=30)
        r.raise_for_status()
        return r.json()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def scenario_of(cadence_ms: float, k: int, first_alone: int, ttft_ms: float, nodelay: int = 1,
                drift: float = 0.0) -> str:
    tag = f"fidelity-{uuid.uuid4().hex[:8]}"  # fresh log per case, even on a reused server
    return (f"cadence_ms={cadence_ms},drift={drift},k={k},first_alone={first_alone},ttft_ms={ttft_ms},"
            f"nodelay={nodelay},tag={tag}")


# ------------------------------------------------------------------------------------- truth


def truth_of(records: list[dict], *, from_generation: bool = False) -> dict:
    """Truth over the server's records of some requests (definitions in the module doc);
    FROM_GENERATION: from the generation times (held-back cases: send times are not arrivals)."""
    if not records:
        raise ValueError("no server records")
    if from_generation:
        return generation_truth(records)
    tok_s, itl, gaps = [], [], []
    for rec in records:
        chunks = rec["chunks"]
        n = sum(c["k"] for c in chunks)
        tok_s.append((n - chunks[0]["k"]) / (chunks[-1]["sent"] - chunks[0]["sent"]))
        for prev, cur in zip(chunks, chunks[1:]):
            g = cur["sent"] - prev["sent"]
            gaps.append(g)
            itl += [g / cur["k"]] * cur["k"]
    return {"requests": len(records), "tok_s": stats.median(tok_s),
            "itl_p50_ms": stats.percentile(itl, 50) * 1e3, "chunk_gap_p50_ms": stats.percentile(gaps, 50) * 1e3,
            "ttft_ms": stats.median([(r["chunks"][0]["sent"] - r["recv"]) * 1e3 for r in records])}


def generation_truth(records: list[dict]) -> dict:
    """The engine's real cadence: per request (n - 1) / (gen_last - gen_first); ITL and chunk gap
    from the generation times (one token per chunk in the held-back cases)."""
    tok_s, itl = [], []
    for rec in records:
        gen = rec["gen"]
        tok_s.append((len(gen) - 1) / (gen[-1] - gen[0]))
        itl += [b - a for a, b in zip(gen, gen[1:])]
    p50 = stats.percentile(itl, 50) * 1e3
    return {"requests": len(records), "tok_s": stats.median(tok_s), "itl_p50_ms": p50, "chunk_gap_p50_ms": p50,
            "ttft_ms": stats.median([(r["gen"][0] - r["recv"]) * 1e3 for r in records]),
            "from": "generation times (TCP_NODELAY off: send times are not arrivals)"}


def rel_err(value: float | None, truth: float) -> float | None:
    return None if value is None else (value - truth) / truth


# ---------------------------------------------------------------------------------- vllm bench


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def vllm_bench_cmd(base_url: str, tokenizer: Path, output_len: int, num_prompts: int, result_dir: Path,
                   result_filename: str) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "bench", "serve",
            "--backend", "vllm", "--base-url", base_url, "--model", MODEL, "--tokenizer", str(tokenizer),
            "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", str(output_len),
            "--num-prompts", str(num_prompts), "--max-concurrency", "1", "--ignore-eos",
            "--save-result", "--result-dir", str(result_dir), "--result-filename", result_filename]


def run_vllm_bench(base_url: str, tokenizer: Path, output_len: int, num_prompts: int, result_dir: Path) -> dict:
    """One `vllm bench serve` subprocess: its result file, and its CPU (RUSAGE_CHILDREN delta) and wall time."""
    name = f"vb-{uuid.uuid4().hex[:8]}.json"
    cmd = vllm_bench_cmd(base_url, tokenizer, output_len, num_prompts, result_dir, name)
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    env.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    cpu0, wall0 = children_cpu_s(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=VLLM_TIMEOUT_S, cwd=ROOT)
    cpu, wall = children_cpu_s() - cpu0, time.perf_counter() - wall0
    if p.returncode != 0:
        raise RuntimeError(f"vllm bench serve exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    result = json.loads((result_dir / name).read_text())
    if result.get("completed") != num_prompts or result.get("failed"):
        raise RuntimeError(f"vllm bench serve: {result.get('completed')} completed, {result.get('failed')} failed "
                           f"of {num_prompts}:\n{p.stdout[-3000:]}")
    return {"result": result, "cpu_s": cpu, "wall_s": wall, "cmd": cmd}


def vllm_startup_cpu(server: TokenServer, tokenizer: Path, result_dir: Path) -> dict:
    """CPU of a vllm bench run that streams almost nothing: one request of 2 tokens."""
    scenario = scenario_of(5, 1, 1, 20)
    run = run_vllm_bench(server.url(scenario), tokenizer, 2, 1, result_dir)
    return {"cpu_s": run["cpu_s"], "wall_s": run["wall_s"],
            "what": "vllm bench serve --num-prompts 1 --random-output-len 2 (python start, imports, "
                    "tokenizer load, dataset sampling, one 2-token request)"}


# -------------------------------------------------------------------------------------- cases


def measure_case(server: TokenServer, cadence_ms: float, k: int, max_tokens: int, repeats: int, *,
                 first_alone: int = 1, ttft_ms: float = 20, nodelay: int = 1, drift: float = 0.0,
                 tokenizer: Path = DEFAULT_TOKENIZER,
                 vllm_bench: bool = True, startup_cpu_s: float | None = None,
                 result_dir: Path | None = None) -> dict:
    """One case: the probe, then (optionally) vllm bench, on the same scenario URL of `server`.
    NODELAY=0: a held-back start (see the module doc); the truth is then the generation times.
    DRIFT: the gap grows by that fraction along the stream (the truth stays the send times)."""
    scenario = scenario_of(cadence_ms, k, first_alone, ttft_ms, nodelay, drift)
    url = server.url(scenario)
    label = f"{cadence_ms:g}ms k={k}" + ("" if first_alone or k == 1 else " bundled-1st")
    if not nodelay:
        label += f" no-NODELAY ttft={ttft_ms:g}"
    if drift:
        label += f" drift {drift:+.0%}"
    row: dict = {"scenario": scenario, "case": label, "nodelay": nodelay, "drift": drift,
                 "cadence_ms": cadence_ms, "k": k, "first_alone": first_alone, "ttft_ms": ttft_ms,
                 "max_tokens": max_tokens, "repeats": repeats}

    warmup = 1
    # The client measure_decode would create itself, made here so that its one-off setup (httpx
    # loads the CA bundle: ~0.1 s CPU) is reported apart from the per-token streaming cost.
    cpu0 = time.process_time()
    client = httpx.Client(timeout=httpx.Timeout(30), trust_env=False)
    setup_cpu = time.process_time() - cpu0
    try:
        cpu0 = time.process_time()
        probe = measure_decode(base_url=url, model=MODEL, prompt="hello", max_tokens=max_tokens, repeats=repeats,
                               warmup=warmup, timeout_s=30, client=client)
        probe_cpu = time.process_time() - cpu0
    finally:
        client.close()
    log = server.log(scenario)
    if len(log) != warmup + probe["repeats_made"]:
        raise RuntimeError(f"server logged {len(log)} requests for the probe, expected {warmup + probe['repeats_made']}")
    t_probe = truth_of(log[warmup:], from_generation=not nodelay)
    row["truth_probe"] = t_probe
    row["probe"] = {
        "tok_s": probe["decode_tok_s"], "tok_s_err": rel_err(probe["decode_tok_s"], t_probe["tok_s"]),
        "itl_p50_ms": probe["itl_ms"]["p50"], "itl_p50_err": rel_err(probe["itl_ms"]["p50"], t_probe["itl_p50_ms"]),
        "ttft_ms": probe["ttft_ms"], "warnings": probe["warnings"], "notes": probe["notes"],
        "flags": [s["flag"] for s in probe["samples"]],
        "held_back_repeats": sum(1 for s in probe["samples"] if s["held_back"]),
        "cpu_s": probe_cpu, "client_setup_cpu_s": setup_cpu,
        "tokens_streamed": (warmup + probe["repeats_made"]) * max_tokens,
        "cpu_us_per_token": probe_cpu / ((warmup + probe["repeats_made"]) * max_tokens) * 1e6,
    }
    if not vllm_bench:
        return row

    own_dir = None
    if result_dir is None:
        own_dir = tempfile.TemporaryDirectory(prefix="probe-fidelity-")
        result_dir = Path(own_dir.name)
    try:
        run = run_vllm_bench(url, tokenizer, max_tokens, repeats, result_dir)
    finally:
        if own_dir is not None:
            own_dir.cleanup()
    log2 = server.log(scenario)
    vb_records = log2[len(log):]
    if len(vb_records) != repeats:
        raise RuntimeError(f"server logged {len(vb_records)} requests for vllm bench, expected {repeats}")
    t_vb = truth_of(vb_records, from_generation=not nodelay)
    res = run["result"]
    tpot_tok_s = 1e3 / res["median_tpot_ms"]
    tokens = res["total_output_tokens"]
    vb = {
        "tok_s_1000_over_median_tpot": tpot_tok_s, "tok_s_err": rel_err(tpot_tok_s, t_vb["tok_s"]),
        "output_throughput": res["output_throughput"],
        "output_throughput_err": rel_err(res["output_throughput"], t_vb["tok_s"]),
        "median_tpot_ms": res["median_tpot_ms"],
        "median_tpot_err_vs_itl_p50": rel_err(res["median_tpot_ms"], t_vb["itl_p50_ms"]),
        "median_itl_ms": res["median_itl_ms"],
        "median_itl_err_vs_chunk_gap_p50": rel_err(res["median_itl_ms"], t_vb["chunk_gap_p50_ms"]),
        "median_ttft_ms": res["median_ttft_ms"], "total_output_tokens": tokens,
        "cpu_s": run["cpu_s"], "wall_s": run["wall_s"],
        "cpu_us_per_token_total": run["cpu_s"] / tokens * 1e6,
    }
    if startup_cpu_s is not None:
        vb["startup_cpu_s"] = startup_cpu_s
        vb["cpu_us_per_token_excl_startup"] = (run["cpu_s"] - startup_cpu_s) / tokens * 1e6
    row["truth_vllm_bench"] = t_vb
    row["vllm_bench"] = vb
    return row


def _reqfunc_child(spec: dict) -> dict:
    """In a child process: vLLM's completions request function, timed with process_time."""
    import asyncio

    import aiohttp
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions

    async def go() -> list[dict]:
        out = []
        for case in spec["cases"]:
            connector = aiohttp.TCPConnector(limit=1, limit_per_host=1, ttl_dns_cache=300, use_dns_cache=True,
                                             keepalive_timeout=60, enable_cleanup_closed=True, force_close=False,
                                             ssl=False)
            async with aiohttp.ClientSession(connector=connector, trust_env=True,
                                             timeout=aiohttp.ClientTimeout(total=600)) as session:
                inp = RequestFuncInput(prompt="hello", api_url=case["url"] + "/v1/completions", prompt_len=1,
                                       output_len=case["max_tokens"], model=MODEL, ignore_eos=True)
                await async_request_openai_completions(inp, session)  # warmup: connection set up
                cpu0 = time.process_time()
                outs = [await async_request_openai_completions(inp, session) for _ in range(spec["repeats"])]
                cpu = time.process_time() - cpu0
            bad = [o.error for o in outs if not o.success or o.output_tokens != case["max_tokens"]]
            tokens = sum(o.output_tokens for o in outs)
            out.append({"scenario": case["scenario"], "cpu_s": cpu, "tokens": tokens, "errors": bad[:3],
                        "cpu_us_per_token": cpu / tokens * 1e6 if tokens else None})
        return out

    return {"cases": asyncio.run(go())}


def vllm_reqfunc_cpu(server: TokenServer, rows: list[dict], repeats: int) -> dict:
    """Per-token client CPU of vLLM bench's request function, one subprocess for all cases."""
    spec = {"repeats": repeats,
            "cases": [{"scenario": r["scenario"], "url": server.url(r["scenario"]), "max_tokens": r["max_tokens"]}
                      for r in rows]}
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_reqfunc-child", json.dumps(spec)],
                       capture_output=True, text=True, env=env, timeout=VLLM_TIMEOUT_S, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"vllm request-function child exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return {c["scenario"]: c for c in json.loads(lines[-1])["cases"]}


def ensure_tokenizer(path: Path) -> None:
    if not (path / "tokenizer.json").exists():
        subprocess.run([sys.executable, "-m", "runners", "tiny-model", str(path)], check=True, cwd=ROOT)


def run_all(cases=CASES, repeats: int = 5, *, first_alone: int = 1, ttft_ms: float = 20,
            tokenizer: Path = DEFAULT_TOKENIZER, vllm_bench: bool = True, startup_run: bool = False,
            reqfunc: bool = True, held_back_cases=HELD_BACK_CASES, drift_cases=DRIFT_CASES) -> dict:
    t0 = time.perf_counter()
    rows = []
    startup = None
    with TokenServer() as server, tempfile.TemporaryDirectory(prefix="probe-fidelity-") as tmp:
        if vllm_bench:
            ensure_tokenizer(tokenizer)
            if startup_run:
                startup = vllm_startup_cpu(server, tokenizer, Path(tmp))
        plan = ([(c, k, n, ttft_ms, 1, 0.0) for c, k, n in cases]
                + [(c, k, n, t, 0, 0.0) for c, k, n, t in held_back_cases]
                + [(c, k, n, ttft_ms, 1, d) for c, k, n, d in drift_cases])
        for cadence_ms, k, n, ttft, nodelay, drift in plan:
            rows.append(measure_case(server, cadence_ms, k, n, repeats, first_alone=first_alone, ttft_ms=ttft,
                                     nodelay=nodelay, drift=drift, tokenizer=tokenizer, vllm_bench=vllm_bench,
                                     startup_cpu_s=startup["cpu_s"] if startup else None, result_dir=Path(tmp)))
        if vllm_bench and reqfunc:
            by_scenario = vllm_reqfunc_cpu(server, rows, repeats)
            for r in rows:
                c = by_scenario[r["scenario"]]
                if c["errors"]:
                    raise RuntimeError(f"vllm request function failed on {r['case']}: {c['errors']}")
                r["vllm_bench"]["reqfunc_cpu_s"] = c["cpu_s"]
                r["vllm_bench"]["reqfunc_cpu_us_per_token"] = c["cpu_us_per_token"]
                # what the total leaves for startup when streaming costs what the request function did
                r["vllm_bench"]["startup_cpu_s_implied"] = (r["vllm_bench"]["cpu_s"]
                                                            - c["cpu_us_per_token"] * 1e-6
                                                            * r["vllm_bench"]["total_output_tokens"])
    return {"rows": rows, "vllm_startup": startup, "wall_s": time.perf_counter() - t0,
            "cpu_count": os.cpu_count(), "loadavg_end": os.getloadavg(),
            "vllm_bench_tok_s_is": "1000 / median_tpot_ms (per-token, excludes TTFT); output_throughput "
                                   "(includes TTFT and client gaps) reported separately"}


# -------------------------------------------------------------------------------------- table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.2f}%"


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def format_table(report: dict) -> str:
    head = ["case", "truth tok/s", "probe tok/s", "err", "flagged", "vb 1000/mTPOT", "err", "vb out_thru", "err",
            "truth ITL p50 tok|chunk ms", "probe ITL err", "vb mTPOT err", "vb mITL err(chunk)",
            "CPU us/tok probe", "vb total", "vb reqfunc"]
    lines = []
    for r in report["rows"]:
        tp, p = r["truth_probe"], r["probe"]
        vb, tv = r.get("vllm_bench"), r.get("truth_vllm_bench")
        g = (lambda key: vb.get(key) if vb else None)
        lines.append([
            r["case"], f"{tp['tok_s']:.2f}", f"{p['tok_s']:.2f}", _pct(p["tok_s_err"]),
            f"{sum(1 for f in p.get('flags', []) if f)}/{len(p.get('flags', []))} ({p.get('held_back_repeats', 0)} held)",
            _f(g("tok_s_1000_over_median_tpot"), ".2f"), _pct(g("tok_s_err")),
            _f(g("output_throughput"), ".2f"), _pct(g("output_throughput_err")),
            f"{tp['itl_p50_ms']:.3f} | {tp['chunk_gap_p50_ms']:.3f}", _pct(p["itl_p50_err"]),
            _pct(g("median_tpot_err_vs_itl_p50")), _pct(g("median_itl_err_vs_chunk_gap_p50")),
            f"{p['cpu_us_per_token']:.0f}", _f(g("cpu_us_per_token_total"), ".0f"),
            _f(g("reqfunc_cpu_us_per_token"), ".0f"),
        ])
    widths = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    out += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in lines]
    s = report.get("vllm_startup")
    setup = stats.median([r["probe"]["client_setup_cpu_s"] for r in report["rows"]])
    notes = [
        "",
        "errors are signed (measured - truth) / truth, each tool against the server's records of its OWN requests",
        "  (truth tok/s and ITL columns: the probe's requests). vb = vllm bench serve; vb tok/s = 1000 / median TPOT;",
        "  vb out_thru = output_throughput (includes TTFT). vb mITL is per chunk, so compared with the per-chunk gap.",
        "no-NODELAY rows: the server leaves TCP_NODELAY off (held-back start); truth = the generation times.",
        "drift rows: the gap between tokens grows (or shrinks) linearly by that much along the stream; truth = send times.",
        "  flagged = probe repeats kept out of its statistics / repeats made (held = repeats whose window",
        "  skipped a burst at the start or end and were measured over the chunks that arrived at their own pace)",
        "CPU: probe = process_time in-process around measure_decode, per token streamed (warmup included; no",
        f"  interpreter/import cost, httpx client setup excluded: {setup:.2f} s CPU per client);",
        "  vb total = RUSAGE_CHILDREN of the whole subprocess / measured tokens (startup included);",
    ]
    implied = [r["vllm_bench"]["startup_cpu_s_implied"] for r in report["rows"]
               if "startup_cpu_s_implied" in r.get("vllm_bench", {})]
    if implied:
        notes.append("  vb reqfunc = vLLM's async_request_openai_completions in-process (process_time, same yardstick as")
        notes.append(f"  the probe); so vb startup = total - streaming = {min(implied):.1f}..{max(implied):.1f} s CPU per run.")
    if s:
        notes.append(f"  --startup-run: {s['cpu_s']:.2f} s CPU for --num-prompts 1 --random-output-len 2; total minus it, "
                     "us/token: " + ", ".join(f"{r['case']} {r['vllm_bench']['cpu_us_per_token_excl_startup']:.0f}"
                                              for r in report["rows"]) + " (noise: startup varies ~1 s)")
    notes.append(f"wall {report['wall_s']:.0f} s on {report['cpu_count']} CPUs, load average at end "
                 f"{report['loadavg_end'][0]:.1f}")
    for r in report["rows"]:
        for w in r["probe"]["warnings"]:
            notes.append(f"probe warning ({r['case']}): {w}")
    return "\n".join(out + notes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON to FILE ('-': stdout)")
    ap.add_argument("--repeats", type=int, default=5, help="measured requests per tool and case (default 5)")
    ap.add_argument("--first-alone", type=int, choices=(0, 1), default=1,
                    help="1 (default): the first token is sent alone, as vLLM does; 0: bundled with the next k-1")
    ap.add_argument("--ttft-ms", type=float, default=20, help="server delay before the first token (default 20)")
    ap.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER, help="for vllm bench (default var/tiny-model)")
    ap.add_argument("--no-vllm-bench", action="store_true", help="the probe only")
    ap.add_argument("--no-held-back", action="store_true", help="skip the TCP_NODELAY-off (held-back start) cases")
    ap.add_argument("--no-drift", action="store_true", help="skip the drifting-pace cases")
    ap.add_argument("--startup-run", action="store_true",
                    help="also run vllm bench once with --num-prompts 1 and subtract its CPU (noisy; ~20 s)")
    ap.add_argument("--no-reqfunc", action="store_true",
                    help="skip the in-process CPU measurement of vLLM's request function (~20 s)")
    ap.add_argument("--_reqfunc-child", dest="reqfunc_child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.reqfunc_child:
        print(json.dumps(_reqfunc_child(json.loads(args.reqfunc_child))))
        return 0
    report = run_all(CASES, args.repeats, first_alone=args.first_alone, ttft_ms=args.ttft_ms,
                     tokenizer=args.tokenizer, vllm_bench=not args.no_vllm_bench,
                     startup_run=args.startup_run, reqfunc=not args.no_reqfunc,
                     held_back_cases=[] if args.no_held_back else HELD_BACK_CASES,
                     drift_cases=[] if args.no_drift else DRIFT_CASES)
    print(format_table(report))
    if args.json:
        text = json.dumps(report, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
