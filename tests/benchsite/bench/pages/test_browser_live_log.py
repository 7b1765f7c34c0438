"""The run page's log grows in Chromium while the run runs: a real GPU worker starts the fake
engine (tests/faults/fake_engine.py, a real process group whose start logs a line every 0.3 s
until it is let through), reads its log and sends the tail with its progress messages through
Redis; the real web worker stores it; the page polls and shows it in place."""
import re
import sys

import httpx
import pytest
from django.db import connection

from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Benchmark, Run
from tests.conftest import Workers, _database_url, wait_for
from tests.faults.harness import FAKE_ENGINE

from .test_browser import _screenshot, _severe_console_errors, _text, _wait

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture
def fake_engine_workers(redis_broker, transactional_db, tmp_path):
    workers = Workers(redis_broker, _database_url(connection.settings_dict), tmp_path, pool="cpu")
    workers.env.update({"BENCH_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}", "BENCH_ENGINE_CPU": "0",
                        "BENCH_LOG_INTERVAL_S": "1", "FAKE_ENGINE_PIDS": str(tmp_path / "engine-pids"),
                        "BENCH_ENGINE_PASS_ENV": "FAKE_ENGINE_*"})
    workers.start("web", "web")
    workers.start("gpu", "gpu.cpu")
    yield workers
    workers.stop()


def _lines_seen(text: str) -> int:
    """The newest 'still loading weights (line N)' the page shows."""
    return max((int(n) for n in re.findall(r"still loading weights \(line (\d+)\)", text)), default=0)


def test_the_run_pages_log_grows_while_the_engine_starts(browser, live_server, fake_engine_workers, tmp_path):  # noqa: F811
    gate = tmp_path / "gate"
    benchmark = Benchmark.objects.create(name="slow start", slug="slow-start", model="/nonexistent/model",
                                         gpu_pool="cpu", prompt="hello", max_tokens=4, repeats=1, warmup=0,
                                         startup_timeout_s=120, time_limit_s=200)
    trigger.variant_create(benchmark=benchmark, name="slow", env={"FAKE_ENGINE_GATE": str(gate),
                                                                   "FAKE_ENGINE_LOG_EVERY_S": "0.3"})
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    browser.execute_script("window.sameDocument = true")  # gone if the page reloads

    first = wait_for(lambda: _lines_seen(_text(browser, "run-log")), 90, interval_s=0.2,
                     what="the engine's first log lines on the page", explain=fake_engine_workers.tails)
    assert "RUNNING" in _text(browser, "run-status") and "starting engine" in _text(browser, "run-phase")
    assert "live from the worker" in _text(browser, "run-log-source")
    later = wait_for(lambda: (n := _lines_seen(_text(browser, "run-log"))) >= first + 3 and n, 30, interval_s=0.2,
                     what="the log to grow", explain=fake_engine_workers.tails)
    assert later > first
    assert browser.execute_script("return window.sameDocument === true"), "the page reloaded instead of updating"
    assert "still loading weights" in httpx.get(f"{live_server.url}/api/runs/{run.pk}/").json()["log_tail"]
    _screenshot(browser, "run-live-log.png")

    gate.touch()  # the engine starts: the run ends, the page reloads with the stored log
    wait_for(lambda: "SUCCEEDED" in _text(browser, "run-status"), 120, interval_s=0.5, what="the run to succeed",
             explain=fake_engine_workers.tails)
    _wait(browser, lambda d: "vllm-serve.log" in _text(d, "run-log-source"), "the stored log")
    run.refresh_from_db()
    assert run.state == Run.State.SUCCEEDED and run.live_log == ""
    assert _severe_console_errors(browser) == []
