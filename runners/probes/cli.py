"""`python -m runners probe decode --base-url URL --model NAME --max-tokens N --repeats R
[--concurrency C] [--prompt-tokens P] [--request-rate R] [--prefill auto|primed|inline] --json`

Prints one JSON object (with --json) or a short summary (runners.probes.streams.measure_point).
Exit status: 0 measured, 2 for bad arguments (concurrency outside 1..1024, say: before any
request) or when the server's answer could not be measured (ProbeError); the reason goes to stderr.
"""
from __future__ import annotations

import json
import sys

from runners.probes.decode import DEFAULT_PROMPT, ProbeError
from runners.probes.streams import MAX_CONCURRENCY, PREFILL_MODES, measure_point


def add_arguments(parser):
    sub = parser.add_subparsers(dest="probe", required=True, metavar="PROBE")
    p = sub.add_parser("decode", help="streamed greedy decode tok/s, TTFT, ITL, at concurrency 1 or more")
    p.add_argument("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="model name as served")
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--repeats", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=1,
                   help=f"streams started at once in each repeat, 1 to {MAX_CONCURRENCY} (default 1)")
    p.add_argument("--prompt-tokens", type=int, default=None,
                   help="cut the prompt to exactly this many tokens with the server's /tokenize")
    p.add_argument("--request-rate", type=float, default=None,
                   help="send each repeat's streams open-loop, as a Poisson process of R requests a second "
                        "(like vllm bench serve --request-rate), not all at once")
    p.add_argument("--prefill", choices=PREFILL_MODES, default="auto",
                   help="where the streams' prefills run: 'primed' before the timed window (each stream's "
                        "prompt sent first with max_tokens 1, then served from the prefix cache: steady "
                        "decode), 'inline' inside it; 'auto' (default) primes closed-loop points of several "
                        "streams with --prompt-tokens")
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="the prompt (with --prompt-tokens: the seed text)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait for the server at any one point (default 120)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def main(args) -> int:
    if args.probe != "decode":  # pragma: no cover - argparse restricts the choices
        print(f"unknown probe {args.probe!r}", file=sys.stderr)
        return 2
    try:
        result = measure_point(base_url=args.base_url, model=args.model, prompt=args.prompt,
                               max_tokens=args.max_tokens, repeats=args.repeats, warmup=args.warmup,
                               concurrency=args.concurrency, prompt_tokens=args.prompt_tokens,
                               request_rate=args.request_rate, prefill=args.prefill, timeout_s=args.timeout)
    except ProbeError as e:
        print(f"decode probe failed: {e.message}", file=sys.stderr)
        if e.received is not None:
            print(f"received: {json.dumps(e.received, default=str)[:2000]}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"decode probe: bad arguments: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        _print_summary(result)
    return 0


def _print_summary(result: dict) -> None:
    itl, ci = result["itl_ms"], result["decode_tok_s_ci"]
    print(f"decode {result['decode_tok_s']:.2f} tok/s per stream (CI {ci[0]:.2f}..{ci[1]:.2f}, "
          f"{len(result['streams'])} streams at concurrency {result['concurrency']}), slowest "
          f"{result['slowest_stream_tok_s']:.2f}, aggregate {result['aggregate_tok_s'] or 0:.2f} tok/s, "
          f"TTFT {result['ttft_ms']:.2f} ms ({result['prefill']} prefill), ITL p50/p90/p99 {itl['p50']:.3f}/{itl['p90']:.3f}/{itl['p99']:.3f} ms")
    if "server_itl_ms_mean" in result:
        print(f"server mean ITL {result['server_itl_ms_mean']:.3f} ms vs client "
              f"{result['client_itl_ms_mean']:.3f} ms (relative difference {result['server_agreement']:.1%})")
    for w in result["warnings"]:
        print(f"warning: {w}")
