"""A stand-in for the vLLM CLI used by the engine tests that need no real engine.

Usage (as the Engine runs it): fake_vllm.py serve MODEL --host H --port P [flags...]
FAKE_VLLM_MODE: ok (serve /health and /version), exit (argparse-like error, code 2),
hang (never healthy), child (also start a grandchild that ignores SIGTERM),
stubborn (ignore SIGTERM itself). FAKE_VLLM_DELAY: seconds before listening.
"""
import http.server
import json
import os
import signal
import subprocess
import sys
import time


def main() -> None:
    argv = sys.argv[1:]
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    print("fake vllm argv:", json.dumps(argv), flush=True)
    print("fake vllm env bind:", os.environ.get("VLLM_CPU_OMP_THREADS_BIND"), flush=True)
    if mode == "exit":
        print("vllm serve: error: unrecognized arguments: --no-such-flag", file=sys.stderr, flush=True)
        sys.exit(2)
    if mode == "child":
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", code])
        print(f"fake vllm grandchild pid {child.pid}", flush=True)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))
    if mode == "hang":
        time.sleep(600)
    host = argv[argv.index("--host") + 1]
    port = int(argv[argv.index("--port") + 1])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                body = b""
            elif self.path == "/version":
                body = b'{"version": "0.0.0+fake"}'
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer((host, port), Handler)
    print(f"fake vllm listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
