"""Observer effect on a real engine: does the probe's timed request decode as fast as the
request a user sends, on the same server?

    .venv/bin/python benchmarks/observer_effect.py [--model var/tiny-model] [--tp 1]
        [--engine-args '--enforce-eager --dtype float32 --max-model-len 512 --max-num-seqs 2']
        [--max-tokens 256] [--rounds 10] [--log vllm-serve.log] [--json out.json]

One engine start, one warmup request, then ROUNDS rounds. Each round sends one request of
each kind, in an order rotated from round to round so that a drift of the host cancels:

  plain     the request a user sends (streamed, greedy, `ignore_eos`; `include_usage` only for
            the token count, one chunk at the end), timed by a minimal client written here with
            httpx, independent of the probe's code: (n - 1) / (t_last - t_first) over the
            arrival times of the chunks (vLLM sends one token per chunk at one request);
  probe     runners.probes.decode.measure_decode with 1 repeat and no warmup: the timed request
            the service sends (`return_token_ids`, `continuous_usage_stats`) and its analysis;
  logprobs  plain + `logprobs: 1`, the probe's former timed request: the cost it no
            longer measures (2.2% on vLLM 0.24, 2 x H200).

Around every request the server's own inter-token latency (vLLM's /metrics histogram, engine
timestamps) is read, so each kind also gets the engine's view of its speed. Reported: per kind
the median tok/s and server ITL; per round the paired ratios probe/plain and logprobs/plain,
with their median and range. The target: probe within 0.2% of plain on GPUs.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `runners` importable
    sys.path.insert(0, str(ROOT))

from benchmarks.decode_noise import ENGINE_ARGS, PROMPT  # noqa: E402 (the tiny engine's settings, one place)
from runners.engine import Engine, EngineSpec  # noqa: E402
from runners.probes.client import CompletionClient  # noqa: E402
from runners.probes.decode import measure_decode  # noqa: E402
from runners.probes.metrics import hist_delta, scrape_server_metrics, settled_metrics  # noqa: E402

CPU_ENGINE_ARGS = shlex.join(ENGINE_ARGS)
KINDS = ("plain", "probe", "logprobs")


def user_request(model: str, max_tokens: int, **extra) -> dict:
    return {"model": model, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, **extra}


def plain_stream(http: httpx.Client, url: str, body: dict) -> dict:
    """One streamed request, timed per network read: {"tok_s", "tokens", "chunks"}."""
    arrivals: list[float] = []
    tokens = None
    buf = b""
    with http.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for piece in resp.iter_bytes():
            now = time.perf_counter()
            buf += piece
            *events, buf = buf.split(b"\n\n")
            for event in events:
                data = event.removeprefix(b"data: ").strip()
                if not data or data == b"[DONE]":
                    continue
                obj = json.loads(data)
                if obj.get("choices") and obj["choices"][0].get("text"):
                    arrivals.append(now)
                if obj.get("usage") and not obj.get("choices"):
                    tokens = obj["usage"]["completion_tokens"]
    if tokens is None or len(arrivals) < 2:
        raise RuntimeError(f"incomplete stream: {len(arrivals)} chunks, usage {tokens}")
    return {"tok_s": (tokens - 1) / (arrivals[-1] - arrivals[0]), "tokens": tokens, "chunks": len(arrivals)}


def server_itl_ms(api: CompletionClient, model: str, before: dict) -> float | None:
    """Mean inter-token latency the engine recorded since BEFORE (one request), in ms."""
    after = settled_metrics(api, model, before, 1)
    delta = hist_delta(before, after, "itl") if after.get("available") else None
    return 1e3 * delta[0] / delta[1] if delta and delta[1] else None


def one_request(kind: str, api: CompletionClient, base_url: str, model: str, max_tokens: int) -> dict:
    before = scrape_server_metrics(api, model=model)
    if kind == "probe":
        r = measure_decode(base_url=base_url, model=model, prompt=PROMPT, max_tokens=max_tokens, repeats=1,
                           warmup=0, client=api.http)
        out = {"tok_s": r["decode_tok_s"], "tokens": max_tokens, "flag": r["samples"][0].get("flag", "")}
    else:
        extra = {"logprobs": 1} if kind == "logprobs" else {}
        out = plain_stream(api.http, api.url("/v1/completions"), user_request(model, max_tokens, **extra))
    out["server_itl_ms"] = server_itl_ms(api, model, before) if before.get("available") else None
    return out


def measure(base_url: str, model: str, *, rounds: int, max_tokens: int) -> list[dict]:
    """ROUNDS rounds of one request per kind, the order rotated each round."""
    out = []
    with CompletionClient(base_url, timeout_s=120) as api:
        plain_stream(api.http, api.url("/v1/completions"), user_request(model, max_tokens))  # warmup
        for i in range(rounds):
            order = KINDS[i % len(KINDS):] + KINDS[:i % len(KINDS)]
            out.append({kind: one_request(kind, api, base_url, model, max_tokens) for kind in order})
            print(f"round {i}: " + "  ".join(f"{k} {out[-1][k]['tok_s']:.2f}" for k in KINDS), flush=True)
    return out


def summarize(rounds: list[dict]) -> dict:
    summary: dict = {"rounds": len(rounds), "kinds": {}}
    for kind in KINDS:
        itl = [r[kind]["server_itl_ms"] for r in rounds if r[kind]["server_itl_ms"] is not None]
        summary["kinds"][kind] = {"median_tok_s": statistics.median(r[kind]["tok_s"] for r in rounds),
                                  "median_server_itl_ms": statistics.median(itl) if itl else None}
    for kind in ("probe", "logprobs"):
        ratios = [r[kind]["tok_s"] / r["plain"]["tok_s"] - 1 for r in rounds]
        summary[f"{kind}_vs_plain"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    return summary


def format_report(summary: dict) -> str:
    lines = [f"{'kind':<9} {'tok/s (median)':>15} {'server ITL ms':>14}"]
    for kind, k in summary["kinds"].items():
        itl = "n/a" if k["median_server_itl_ms"] is None else f"{k['median_server_itl_ms']:.4f}"
        lines.append(f"{kind:<9} {k['median_tok_s']:>15.2f} {itl:>14}")
    for kind in ("probe", "logprobs"):
        v = summary[f"{kind}_vs_plain"]
        lines.append(f"{kind} vs plain, paired per round: median {100 * v['median']:+.2f}% "
                     f"(range {100 * v['min']:+.2f}% .. {100 * v['max']:+.2f}%) over {summary['rounds']} rounds")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(ROOT / "var" / "tiny-model"))
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--engine-args", default=CPU_ENGINE_ARGS, help="flags for vllm serve, one string")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--startup-timeout", type=float, default=600)
    ap.add_argument("--log", type=Path, help="the engine's log (default: a temporary folder)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    log = a.log or Path(tempfile.mkdtemp(prefix="observer-")) / "vllm-serve.log"
    spec = EngineSpec(model=a.model, tensor_parallel_size=a.tp, args=shlex.split(a.engine_args), log_path=log,
                      startup_timeout_s=a.startup_timeout)
    t0 = time.perf_counter()
    with Engine(spec) as engine:
        print(f"engine ready in {time.perf_counter() - t0:.0f} s (log {log})", flush=True)
        rounds = measure(engine.base_url, spec.served_model_name, rounds=a.rounds, max_tokens=a.max_tokens)
    summary = summarize(rounds)
    print(format_report(summary))
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a) | {"json": str(a.json)}, "summary": summary,
                                      "rounds": rounds}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
