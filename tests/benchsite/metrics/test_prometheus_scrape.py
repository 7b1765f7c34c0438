"""A real Prometheus (Debian's `prometheus` package; `make prometheus`) scrapes the service under
gunicorn with two workers in multiprocess mode, and its HTTP API answers for the run counts and
for a counter that another process (the reaper, as a Celery worker runs it) added to."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.conftest import ROOT, _database_url

from .scrape import TOKEN

PROMETHEUS = os.environ.get("BENCH_PROMETHEUS", shutil.which("prometheus") or "/usr/bin/prometheus")
if not os.path.isfile(PROMETHEUS):
    # `make test` installs it (the `prometheus` target): a missing server is an install error, never a skip.
    raise RuntimeError(f"Prometheus is required: {PROMETHEUS} is missing (run `make prometheus`)")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, **headers) -> bytes:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as response:
        return response.read()


def _wait(what: str, probe, timeout_s: float = 60, logs=()):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})\n{tails}")


class Process:
    """A child process with its output in a log file, stopped at the end."""

    def __init__(self, name: str, cmd: list[str], env: dict, log_dir):
        self.log = log_dir / f"{name}.log"
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def service_env(tmp_path, transactional_db):
    from django.db import connection

    multiproc = tmp_path / "prometheus-multiproc"
    multiproc.mkdir()
    return {**os.environ, "DATABASE_URL": _database_url(connection.settings_dict), "BENCH_VAR_DIR": str(tmp_path),
            "PROMETHEUS_MULTIPROC_DIR": str(multiproc), "BENCH_METRICS_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}


def _prometheus_config(tmp_path, service_port: int):
    config = tmp_path / "prometheus.yml"
    # JSON is YAML: no YAML writer needed
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{"job_name": "decode-bench", "metrics_path": "/metrics",
                            "authorization": {"credentials": TOKEN},
                            "static_configs": [{"targets": [f"127.0.0.1:{service_port}"]}]}]}))
    return config


def _query(prometheus_port: int, expr: str):
    url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    answer = json.loads(_get(url))
    assert answer["status"] == "success", answer
    results = answer["data"]["result"]
    return float(results[0]["value"][1]) if results else None


def test_prometheus_scrapes_the_service_and_answers_a_query(service_env, tmp_path, sent):
    from benchsite.bench.lifecycle import claim, trigger
    from benchsite.bench.models import Benchmark, Run

    benchmark = Benchmark.objects.create(name="tiny", slug="tiny", model="m", gpu_pool="h200x2")
    for name in ("eager", "graphs", "nccl"):
        trigger.variant_create(benchmark=benchmark, name=name)
    runs = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.WEBHOOK)
    claim.run_claim(run_id=runs[0].id, task_id="t", worker_host="gpu-a")
    Run.objects.filter(id=runs[0].id).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    # the reaper in a process of its own, as the web-queue Celery worker's beat runs it
    reaper = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from benchsite.bench.lifecycle import reap; "
                               "print(reap.runs_reap_stale())"],
        cwd=ROOT, env={**service_env, "DJANGO_SETTINGS_MODULE": "benchsite.settings"},
        capture_output=True, text=True, timeout=60)
    assert reaper.returncode == 0 and reaper.stdout.strip().endswith("1"), reaper.stderr[-3000:]

    service_port, prometheus_port = _free_port(), _free_port()
    gunicorn = Process("gunicorn", [sys.executable, "-m", "gunicorn", "benchsite.wsgi", "-w", "2",
                                    "-b", f"127.0.0.1:{service_port}"], service_env, tmp_path)
    prometheus = Process("prometheus", [PROMETHEUS, f"--config.file={_prometheus_config(tmp_path, service_port)}",
                                        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                        f"--web.listen-address=127.0.0.1:{prometheus_port}"], os.environ, tmp_path)
    logs = (gunicorn.log, prometheus.log)
    try:
        _wait("gunicorn", lambda: _get(f"http://127.0.0.1:{service_port}/metrics",
                                       Authorization=f"Bearer {TOKEN}"), logs=logs)
        queued = _wait("Prometheus to scrape the queued runs", lambda: _query(
            prometheus_port, 'sum(decode_bench_runs{state="QUEUED", pool="h200x2", trigger="webhook"})'), logs=logs)
        assert queued == 2
        assert _query(prometheus_port, 'decode_bench_runs{state="FAILED", pool="h200x2", trigger="webhook"}') == 1
        # written by the reaper's process, read by gunicorn's: the multiprocess files add up
        assert _query(prometheus_port, 'sum(decode_bench_runs_reaped_total{action="failed"})') == 1
        assert _query(prometheus_port, 'up{job="decode-bench"}') == 1
        assert _query(prometheus_port, 'decode_bench_queue_oldest_age_seconds{pool="h200x2"}') >= 0
    finally:
        prometheus.stop()
        gunicorn.stop()
