"""Fixtures for the webhook, API and commit-status tests: a watched repository, signed
deliveries, tasks recorded instead of sent, and a local HTTP server playing GitHub's API."""
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, EngineSource
from benchsite.integrations.models import RepoWatch

SECRET = "s3cret-for-tests"
SECRET_ENV = "BENCH_TEST_WEBHOOK_SECRET"
REPO_HTTPS = "https://github.com/vllm-project/vllm"
SHA_A = "a" * 40
SHA_B = "b" * 40
SHA_C = "c" * 40


def make_benchmark(slug: str, repo_url: str = REPO_HTTPS + ".git") -> Benchmark:
    source, _ = EngineSource.objects.get_or_create(name=repo_url, defaults={"kind": "git", "repo_url": repo_url})
    benchmark = Benchmark.objects.create(name=slug, slug=slug, model="/models/tiny", engine_source=source)
    trigger.variant_create(benchmark=benchmark, name="eager", flags=["--enforce-eager"], is_reference=True)
    trigger.variant_create(benchmark=benchmark, name="compiled")
    pools.pool_workers_seen(worker="gpu@test-host", pools=[benchmark.gpu_pool])  # a GPU worker serves its pool
    return benchmark


@pytest.fixture
def watched(db, monkeypatch):
    """github.com/vllm-project/vllm watched on main and perf/*, running two benchmarks; the
    watch is written in the ssh form, deliveries name the https form."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    benchmarks = [make_benchmark("tiny-a"), make_benchmark("tiny-b")]
    watch = RepoWatch.objects.create(repo_url="git@github.com:vllm-project/vllm.git", branches=["main", "perf/*"],
                                     secret_env=SECRET_ENV)
    watch.benchmarks.set(benchmarks)
    return watch


def github_push(*, ref="refs/heads/main", after=SHA_A, repo=REPO_HTTPS, deleted=False, **extra) -> dict:
    return {
        "ref": ref, "before": "0" * 40, "after": after, "created": False, "deleted": deleted, "forced": False,
        "repository": {"full_name": repo.split("github.com/")[-1], "html_url": repo, "clone_url": repo + ".git",
                       "ssh_url": "git@github.com:" + repo.split("github.com/")[-1] + ".git"},
        "head_commit": None if deleted else {"id": after, "message": "Speed up decode"},
        **extra,
    }


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class FakeGitHub:
    """GitHub's statuses endpoint on 127.0.0.1: records each request, answers the scripted codes
    in order and then 201."""

    def __init__(self, script=()):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with fake._lock:
                    fake.requests.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                    code = fake.script.pop(0) if fake.script else 201
                answer = json.dumps({"state": "ok"} if code < 400 else {"message": "Server Error"}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v3"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
