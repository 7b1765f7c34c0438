"""A stand-in for `vllm serve` that streams tokens and then fails on request: a real process
group that the GPU worker starts through BENCH_VLLM_COMMAND, so that the behaviour under test
(deadlines, process groups, reporting) is ours and not the engine's.

    fake_engine.py serve MODEL --host H --port P [flags...]

Its behaviour comes from its environment (a variant's `env` reaches it through the job spec):
  FAKE_ENGINE_MODE        ok | hang (stop sending tokens mid-stream) | exit (die mid-stream)
  FAKE_ENGINE_AFTER       tokens sent before hang/exit (default 3)
  FAKE_ENGINE_TOKEN_S     seconds between tokens (default 0.01)
  FAKE_ENGINE_GATE        a file: the server starts listening (is healthy) once it exists
  FAKE_ENGINE_LOG_EVERY_S while waiting for the gate, a log line this often (a slow start that logs)
  FAKE_ENGINE_PIDS        a file: the server appends its pid there once listening
  FAKE_ENGINE_ENV_DUMP    a file: the server writes its whole environment there (JSON) at start
Standard library only.
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODE = os.environ.get("FAKE_ENGINE_MODE", "ok")
AFTER = int(os.environ.get("FAKE_ENGINE_AFTER", "3"))
TOKEN_S = float(os.environ.get("FAKE_ENGINE_TOKEN_S", "0.01"))
GATE = os.environ.get("FAKE_ENGINE_GATE", "")
LOG_EVERY_S = float(os.environ.get("FAKE_ENGINE_LOG_EVERY_S", "0"))


def log(line: str) -> None:
    print(f"fake engine: {line}", flush=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/version":
            self._send(200, b'{"version": "0.0.0+fault"}')
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self.path != "/v1/completions":
            self._send(404, b"{}")
        elif body.get("stream"):
            self._stream(int(body["max_tokens"]))
        else:
            self._complete(int(body["max_tokens"]))

    def _stream(self, n: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for i in range(n):
            if MODE in ("hang", "exit") and i == AFTER:
                if MODE == "exit":
                    log("RuntimeError: CUDA error: an illegal memory access was encountered (planted)")
                    os._exit(3)
                log(f"stopped sending tokens after {i} (planted hang)")
                time.sleep(3600)
            time.sleep(TOKEN_S)
            chunk = {"choices": [{"index": 0, "text": f" t{i}", "token_ids": [100 + i], "finish_reason":
                                  "length" if i == n - 1 else None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def _complete(self, n: int) -> None:
        ids = [100 + i for i in range(n)]
        choice = {"index": 0, "text": "".join(f" t{i}" for i in range(n)), "token_ids": ids, "finish_reason": "length",
                  "logprobs": {"tokens": [f"token_id:{t}" for t in ids], "token_logprobs": [-0.1] * n,
                               "top_logprobs": [{f"token_id:{t}": -0.1, "token_id:1": -5.0} for t in ids]}}
        self._send(200, json.dumps({"choices": [choice], "usage": {"completion_tokens": n}}).encode())


def main(argv: list[str]) -> None:
    host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
    if os.environ.get("FAKE_ENGINE_ENV_DUMP"):
        Path(os.environ["FAKE_ENGINE_ENV_DUMP"]).write_text(json.dumps(dict(os.environ), sort_keys=True))
    if GATE:
        log(f"waiting for {GATE}")
    waited, last_line = 0, time.monotonic()
    while GATE and not Path(GATE).exists():
        time.sleep(0.05)
        if LOG_EVERY_S and time.monotonic() - last_line >= LOG_EVERY_S:
            waited, last_line = waited + 1, time.monotonic()
            log(f"still loading weights (line {waited})")
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    if os.environ.get("FAKE_ENGINE_PIDS"):
        with open(os.environ["FAKE_ENGINE_PIDS"], "a") as pids:
            pids.write(f"{os.getpid()}\n")
    log(f"listening on {host}:{port} (mode {MODE})")
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
