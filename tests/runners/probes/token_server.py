"""A fake vLLM completions server that emits tokens on an exact, recorded cadence.

Standard library only; run as its own process (`python token_server.py --port 0`; it prints
`PORT <n>` when ready) so that its busy-wait never competes with the probe for a GIL.

The scenario is part of the URL, so tests never share state: a probe pointed at
`http://127.0.0.1:PORT/s/cadence_ms=5,k=3,n_warm=0,tag=x` posts to
`/s/cadence_ms=5,k=3,tag=x/v1/completions` and scrapes `/s/.../metrics`.

Scenario keys (defaults in DEFAULTS):
  cadence_ms   interval between generated tokens (the engine's step time)
  drift        the interval grows linearly along the stream from cadence_ms to
               cadence_ms x (1 + drift) between the last two tokens (-0.3: it shrinks by 30%);
               an eager engine's pace drifts like this
  ttft_ms      delay from request receipt to the first token
  k            tokens per chunk (like vLLM --stream-interval); 1 = one token per chunk
  first_alone  1: the first token goes alone (vLLM's behaviour), 0: it is bundled too
  mode         normal | hang | http500 | close_early | no_done | bad_json | all_at_end |
               burst_end | no_ids | mismatch | zero | error_event
               (all_at_end: every event in ONE write at the end; burst_end: the events are
               held back to the end, then written one by one `burst_gap_ms` apart)
  burst_gap_ms gap between the held-back events of burst_end (0.1; 2 ms plays an API server that
               was starved during the decode and then writes what it buffered at its own pace)
  bursts       the first `bursts` requests of the scenario behave as burst_end, the rest as `mode`
  close_after  tokens sent before close_early / no_done / bad_json end the stream
  metrics      1: serve vLLM-like Prometheus histograms at /s/.../metrics (else 404)
  nodelay      1: set TCP_NODELAY on the connection, as vLLM's uvicorn does; 0: leave Nagle on,
               so small writes made while earlier data is unacknowledged wait for the client's
               (delayed) ACK and then leave in one burst: a held-back start
  cadences     several streams at once, each with its own cadence: `5_7_11` gives the requests of
               the scenario, in the order they arrive, the cadences 5, 7, 11, 5, ... ms (slot = arrival
               index mod 3, recorded as `slot` and `cadence_ms` in the log); empty: every request
               cadence_ms. Requests are served concurrently, one thread each; each completion's id,
               `cmpl-fake-<arrival index>`, is in its chunks and in the log (`id`)
  burst_slot   the requests of that slot behave as burst_end (-1: none): one held-back stream
               among clean ones
  max_model_len the context /tokenize reports
  prefill_ms   an uncached prompt's prefill: this many ms per prompt token, one prompt at a time
               (a scenario's prefills queue behind each other), before its first token (+ ttft_ms);
               0: no prefill time
  prefill_slow while any request of the scenario prefills, every other stream's token interval
               is this much longer (1.0: twice as long): chunked prefill sharing the decode steps
  prefix_cache 1: a request whose (cache_salt, prompt) an earlier request sent is served from the
               cache (no prefill), and the counters vllm:prefix_cache_queries/hits (prompt tokens;
               a hit is all but the last) move, as vLLM's do; 0: they stay at 0 (caching off)
  tag          free text, to keep logs of different tests apart

POST /tokenize {"prompt", "add_special_tokens"} and /detokenize {"tokens"} play vLLM's with a
whitespace tokenizer (one token per word, ids given in order of first sight, BOS id 1 added
unless add_special_tokens is false); a completion's usage.prompt_tokens counts its prompt so.

Like vLLM, a chunk carries `logprobs` only when the request asked for them, and `token_ids`
when it set `return_token_ids`.

Every token is "generated" by waiting (sleep, then spin) until its scheduled time
t0 + ttft + offset(i) (i x cadence, or the sum of the drifting intervals), so generation never
slips from its schedule; a chunk is written once its last token
is generated, and the time right before the write (the bytes cannot leave earlier) is recorded
as the TRUE send time of every token in it (`sent`; `sent_after`: when the write returned).
GET /_log?scenario=<s> returns the records of all requests of a scenario:
{"recv": t, "chunks": [{"sent": t, "sent_after": t, "k": k}], "gen": [t per token],
 "usage_only_sent": bool, "request": {the request's logprobs, return_token_ids, stream_options, cache_salt}}.
With nodelay=0, `sent` is when the write was handed to the kernel, NOT when the bytes left:
the truth is then the generation times `gen`.
Times are time.perf_counter() (CLOCK_MONOTONIC: comparable across processes on Linux).
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

DEFAULTS = {"cadence_ms": 5.0, "drift": 0.0, "ttft_ms": 20.0, "k": 1, "first_alone": 0, "mode": "normal",
            "close_after": 5, "metrics": 0, "nodelay": 1, "bursts": 0, "burst_gap_ms": 0.1, "tag": "",
            "cadences": "", "burst_slot": -1, "max_model_len": 4096, "prefill_ms": 0.0, "prefill_slow": 0.0,
            "prefix_cache": 1}

LOCK = threading.Lock()
LOGS: dict[str, list[dict]] = {}
HIST: dict[str, dict[str, list[float]]] = {}  # scenario -> metric -> [sum, count]
ARRIVALS: dict[str, int] = {}  # scenario -> completions received (the multi-stream slots)
CACHED: dict[str, set] = {}  # scenario -> (cache_salt, prompt) of every request seen
PREFILLS: dict[str, list[tuple[float, float]]] = {}  # scenario -> (start, end) of every prefill
PREFIX: dict[str, list[float]] = {}  # scenario -> [prompt tokens looked up, found]
VOCAB: dict[str, int] = {}  # the whitespace tokenizer's words, ids from 1000 in order of first sight
BOS = 1


def encode(text: str, special: bool = True) -> list[int]:
    with LOCK:
        ids = [VOCAB.setdefault(w, 1000 + len(VOCAB)) for w in text.split()]
    return [BOS] + ids if special else ids


def decode_ids(ids: list[int]) -> str:
    with LOCK:
        words = {i: w for w, i in VOCAB.items()}
    return " ".join(words.get(i, f"<{i}>") for i in ids if i != BOS)


def parse_scenario(s: str) -> dict:
    cfg = dict(DEFAULTS)
    for part in filter(None, s.split(",")):
        key, _, value = part.partition("=")
        if key not in DEFAULTS:
            raise ValueError(f"unknown scenario key {key!r}")
        cfg[key] = type(DEFAULTS[key])(value)
    return cfg


def wait_until(t: float) -> None:
    while True:
        rem = t - time.perf_counter()
        if rem <= 0:
            return
        if rem > 0.0008:
            time.sleep(rem - 0.0005)
        # else spin (the last half millisecond)


def schedule(n: int, cadence: float, drift: float) -> list[float]:
    """Offset of each token from the first: interval j (before token j + 1) is
    cadence x (1 + drift x j / (n - 2)), from cadence to cadence x (1 + drift)."""
    offsets = [0.0]
    for j in range(n - 1):
        offsets.append(offsets[-1] + cadence * (1 + drift * j / max(n - 2, 1)))
    return offsets


def prefilling(scenario: str, t: float) -> bool:
    """Some request of SCENARIO was prefilling at T."""
    with LOCK:
        return any(start <= t < end for start, end in PREFILLS.get(scenario, []))


def token_id(i: int) -> int:
    return (i * 7919 + 13) % 30000 + 100


def token_text(i: int) -> str:
    return f" w{token_id(i)}"


def observe(scenario: str, metric: str, value: float) -> None:
    h = HIST.setdefault(scenario, {}).setdefault(metric, [0.0, 0.0])
    h[0] += value
    h[1] += 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # The scenario (in the request line) is not known yet: NODELAY per request, in stream().
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):  # quiet
        pass

    # ---------------------------------------------------------------- helpers
    def _split(self):
        u = urlparse(self.path)
        parts = u.path.split("/")
        # ["", "s", "<scenario>", "v1", "completions"]
        if len(parts) >= 3 and parts[1] == "s":
            return parts[2], "/" + "/".join(parts[3:]), u
        return "", u.path, u

    def _plain(self, status: int, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, payload: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    # ---------------------------------------------------------------- routes
    def do_GET(self):
        scenario, path, u = self._split()
        if path == "/_log":
            s = parse_qs(u.query).get("scenario", [""])[0]
            with LOCK:
                self._plain(200, json.dumps(LOGS.get(s, [])))
            return
        if path == "/metrics":
            cfg = parse_scenario(scenario)
            if not cfg["metrics"]:
                self._plain(404, '{"detail":"Not Found"}')
                return
            lines = []
            with LOCK:
                hist = HIST.get(scenario, {})
                for metric in ("vllm:inter_token_latency_seconds", "vllm:request_decode_time_seconds",
                               "vllm:time_to_first_token_seconds"):
                    s, c = hist.get(metric, [0.0, 0.0])
                    labels = 'engine="0",model_name="fake-model"'
                    lines += [f"# HELP {metric} fake", f"# TYPE {metric} histogram",
                              f'{metric}_bucket{{{labels},le="+Inf"}} {c}',
                              f"{metric}_count{{{labels}}} {c}", f"{metric}_sum{{{labels}}} {s}"]
                queries, hits = PREFIX.get(scenario, [0.0, 0.0])
                for metric, value in (("vllm:prefix_cache_queries", queries), ("vllm:prefix_cache_hits", hits)):
                    lines += [f"# HELP {metric} fake", f"# TYPE {metric} counter",
                              f'{metric}_total{{engine="0",model_name="fake-model"}} {value}']
                # a series for another model, which the probe must ignore
                lines.append('vllm:inter_token_latency_seconds_count{engine="0",model_name="other"} 1000.0')
                lines.append('vllm:inter_token_latency_seconds_sum{engine="0",model_name="other"} 1000.0')
            self._plain(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4")
            return
        self._plain(404, '{"detail":"Not Found"}')

    def do_POST(self):
        recv = time.perf_counter()
        scenario, path, _ = self._split()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path in ("/tokenize", "/detokenize"):
            self.tokenizer(path, parse_scenario(scenario), json.loads(body))
            return
        if path != "/v1/completions":
            self._plain(404, '{"detail":"Not Found"}')
            return
        cfg = parse_scenario(scenario)
        req = json.loads(body)
        mode = cfg["mode"]
        if mode == "hang":
            time.sleep(30)
            return
        if mode == "http500":
            self._plain(500, json.dumps({"error": {"message": "EngineCore died: fake failure for the test",
                                                   "type": "InternalServerError", "code": 500}}))
            return
        self.stream(scenario, cfg, req, recv)

    def tokenizer(self, path: str, cfg: dict, req: dict) -> None:
        if path == "/tokenize":
            ids = encode(req["prompt"], req.get("add_special_tokens", True))
            self._plain(200, json.dumps({"count": len(ids), "max_model_len": cfg["max_model_len"], "tokens": ids}))
        else:
            self._plain(200, json.dumps({"prompt": decode_ids(req["tokens"])}))

    def stream(self, scenario: str, cfg: dict, req: dict, recv: float) -> None:
        n = int(req["max_tokens"])
        model = req.get("model", "fake-model")
        mode = cfg["mode"]
        cadences = [float(c) for c in cfg["cadences"].split("_") if c] or [cfg["cadence_ms"]]
        with LOCK:
            if len(LOGS.get(scenario, [])) < cfg["bursts"]:
                mode = "burst_end"
            arrival = ARRIVALS.get(scenario, 0)
            ARRIVALS[scenario] = arrival + 1
        slot = arrival % len(cadences)
        response_id = f"cmpl-fake-{arrival}"
        if slot == cfg["burst_slot"]:
            mode = "burst_end"
        cadence = cadences[slot] / 1e3
        k = max(1, cfg["k"])
        if mode == "zero":
            n = 0
        # chunk boundaries: lists of token indices
        groups: list[list[int]] = []
        i = 0
        if cfg["first_alone"] and n:
            groups.append([0])
            i = 1
        while i < n:
            groups.append(list(range(i, min(i + k, n))))
            i += k
        record = {"recv": recv, "chunks": [], "gen": [], "usage_only_sent": False, "mode": mode, "slot": slot, "id": response_id,
                  "cadence_ms": cadence * 1e3,
                  "request": {key: req.get(key) for key in ("logprobs", "return_token_ids", "stream_options", "cache_salt")}}
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if cfg["nodelay"] else 0)

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

        prompt_ids = encode(req.get("prompt") or "")
        t0 = max(time.perf_counter(), self.prefill(scenario, cfg, req, len(prompt_ids), recv)) + cfg["ttft_ms"] / 1e3
        offsets = schedule(n, cadence, cfg["drift"])
        due = t0
        sent_tokens = 0
        pending: list[bytes] = []
        for gi, group in enumerate(groups):
            for tok in group:
                wait_until(due)
                record["gen"].append(time.perf_counter())
                if tok + 1 < n:
                    due += (offsets[tok + 1] - offsets[tok]) * (1 + cfg["prefill_slow"] * prefilling(scenario, due))
            sent_tokens += len(group)
            choice = {
                "index": 0,
                "text": "".join(token_text(t) for t in group),
                "logprobs": None,
                "finish_reason": "length" if sent_tokens == n else None,
                "stop_reason": None,
            }
            if req.get("logprobs") is not None:
                choice["logprobs"] = {"text_offset": [0] * len(group),
                                      "token_logprobs": [-0.25] * len(group),
                                      "tokens": [token_text(t) for t in group],
                                      "top_logprobs": [{token_text(t): -0.25} for t in group]}
            if mode != "no_ids" and req.get("return_token_ids"):
                choice["token_ids"] = [token_id(t) for t in group]
                if mode == "mismatch" and gi == 2:
                    choice["token_ids"] = choice["token_ids"] + [1]
            if gi == 0:
                choice["prompt_token_ids"] = prompt_ids
            obj = {"id": response_id, "object": "text_completion", "created": 0, "model": model,
                   "choices": [choice],
                   "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": sent_tokens,
                             "total_tokens": len(prompt_ids) + sent_tokens}}
            event = b"data: " + json.dumps(obj).encode() + b"\n\n"
            if mode == "bad_json" and sent_tokens > cfg["close_after"]:
                event = b'data: {"id": "cmpl-fake", "choices": [{"index": 0, "text": "tru\n\n'
            if mode == "error_event" and sent_tokens > cfg["close_after"]:
                event = (b'data: {"error": {"message": "fake mid-stream failure", "type": '
                         b'"InternalServerError", "code": 500}}\n\n')
            if mode in ("all_at_end", "burst_end"):
                pending.append(event)
                record["chunks"].append({"sent": None, "k": len(group)})
            else:
                before = time.perf_counter()
                self._chunk(event)
                record["chunks"].append({"sent": before, "sent_after": time.perf_counter(), "k": len(group)})
            if mode in ("bad_json", "error_event") and sent_tokens > cfg["close_after"]:
                break
            if mode in ("close_early", "no_done") and sent_tokens >= cfg["close_after"]:
                break
        if mode == "close_early":
            self._save(scenario, record)
            self.wfile.flush()
            self.request.shutdown(socket.SHUT_RDWR)  # drop the connection mid-body
            self.close_connection = True
            return
        if mode not in ("no_done",):
            final = {"id": response_id, "object": "text_completion", "created": 0, "model": model,
                     "choices": [],
                     "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": sent_tokens,
                               "total_tokens": len(prompt_ids) + sent_tokens}}
            tail = b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n"
            if mode == "all_at_end":
                t = time.perf_counter()
                self._chunk(b"".join(pending) + tail)
                for c in record["chunks"]:
                    c["sent"] = t
            elif mode == "burst_end":
                t = time.perf_counter()
                for j, (event, c) in enumerate(zip(pending, record["chunks"])):
                    wait_until(t + j * cfg["burst_gap_ms"] / 1e3)
                    c["sent"] = time.perf_counter()
                    self._chunk(event)
                self._chunk(tail)
            else:
                self._chunk(tail)
            record["usage_only_sent"] = True
        self._chunk(b"")  # end of the chunked body
        self._save(scenario, record)

    def prefill(self, scenario: str, cfg: dict, req: dict, prompt_tokens: int, recv: float) -> float:
        """When the request's prefill ends: at RECV for a cached prompt (or no prefill time), else
        after the scenario's prefills queued before it; counts the prefix-cache lookup."""
        key = (req.get("cache_salt"), req.get("prompt"))
        with LOCK:
            seen = CACHED.setdefault(scenario, set())
            cached = bool(cfg["prefix_cache"]) and key in seen
            seen.add(key)
            if cfg["prefix_cache"]:
                counters = PREFIX.setdefault(scenario, [0.0, 0.0])
                counters[0] += prompt_tokens
                counters[1] += prompt_tokens - 1 if cached else 0
            if cached or not cfg["prefill_ms"]:
                return recv
            queue = PREFILLS.setdefault(scenario, [])
            start = max([recv] + [end for _, end in queue])
            queue.append((start, start + prompt_tokens * cfg["prefill_ms"] / 1e3))
            return queue[-1][1]

    def _save(self, scenario: str, record: dict) -> None:
        gen = record["gen"]
        with LOCK:
            LOGS.setdefault(scenario, []).append(record)
            if gen:
                observe(scenario, "vllm:time_to_first_token_seconds", gen[0] - record["recv"])
                observe(scenario, "vllm:request_decode_time_seconds", gen[-1] - gen[0])
                for a, b in zip(gen, gen[1:]):
                    observe(scenario, "vllm:inter_token_latency_seconds", b - a)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog of 5 resets connections when 64 streams start at once


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    # Concurrent streams each spin the last half millisecond before a token while holding the GIL:
    # at the default 5 ms switch interval one stream's spin delays another's token by up to 5 ms.
    sys.setswitchinterval(5e-5)
    server = Server(("127.0.0.1", args.port), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
