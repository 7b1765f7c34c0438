"""`python -m runners probe decode --base-url URL --model NAME --max-tokens N --repeats R --json`

Prints one JSON object (with --json) or a short summary. Exit status: 0 measured, 2 when the
server's answer could not be measured (ProbeError; the reason goes to stderr).
"""
from __future__ import annotations

import json
import sys

from runners.probes.decode import DEFAULT_PROMPT, ProbeError, measure_decode


def add_arguments(parser):
    sub = parser.add_subparsers(dest="probe", required=True, metavar="PROBE")
    p = sub.add_parser("decode", help="single-request streamed greedy decode tok/s, TTFT, ITL")
    p.add_argument("--base-url", required=True, help="server root, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="model name as served")
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--repeats", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait for the server at any one point (default 120)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def main(args) -> int:
    if args.probe != "decode":  # pragma: no cover - argparse restricts the choices
        print(f"unknown probe {args.probe!r}", file=sys.stderr)
        return 2
    try:
        result = measure_decode(base_url=args.base_url, model=args.model, prompt=args.prompt,
                                max_tokens=args.max_tokens, repeats=args.repeats,
                                warmup=args.warmup, timeout_s=args.timeout)
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
        itl = result["itl_ms"]
        ci = result["decode_tok_s_ci"]
        print(f"decode {result['decode_tok_s']:.2f} tok/s (CI {ci[0]:.2f}..{ci[1]:.2f}, "
              f"{len(result['samples'])} repeats), TTFT {result['ttft_ms']:.2f} ms, "
              f"ITL p50/p90/p99 {itl['p50']:.3f}/{itl['p90']:.3f}/{itl['p99']:.3f} ms")
        if "server_itl_ms_mean" in result:
            print(f"server mean ITL {result['server_itl_ms_mean']:.3f} ms vs client "
                  f"{result['client_itl_ms_mean']:.3f} ms (relative difference {result['server_agreement']:.1%})")
        for w in result["warnings"]:
            print(f"warning: {w}")
    return 0
