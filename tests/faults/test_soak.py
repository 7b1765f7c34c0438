"""A short soak (benchmarks/soak.py) for real: pushes, PR deliveries and a page reader against
gunicorn and the real workers on a PostgreSQL database of its own, with two faults at seeded
times. The 30-minute soak with all five faults is the benchmark's (docs/methods/faults.md)."""
import json
import os
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.postgres_pass, pytest.mark.timeout(240)]

KEYS = {"seed", "load_s", "drained", "runs_triggered", "runs_finished", "runs_failed", "runs_cancelled",
        "runs_in_flight", "runs_lost", "failed_runs", "deliveries", "pages", "faults", "faults_injected",
        "faults_survived", "growth", "queue_lengths", "rss_mb_samples", "ok"}


def _postgres_server() -> str:
    """The server of this pass's DATABASE_URL (the soak makes and drops a database of its own)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return "postgres://postgres@127.0.0.1:5432"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_a_short_soak_loses_no_run_and_survives_its_faults():
    done = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--seconds", "15", "--faults", "database_cut,redis_restart",
         "--push-every-s", "8", "--seed", "3", "--recover-s", "90", "--drain-s", "90",
         "--postgres", _postgres_server(), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=230)
    assert done.stdout, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert KEYS <= set(figures), sorted(KEYS - set(figures))
    assert figures["runs_lost"] == 0, (figures["lost_runs"], figures["drained"], figures["faults"])
    assert figures["drained"] and figures["runs_in_flight"] == 0
    assert figures["runs_triggered"] >= 3 and figures["runs_finished"] >= 2  # the deliveries' and the probes'
    assert figures["deliveries"]["sent"] >= 2 and set(figures["deliveries"]["statuses"]) == {"202"}
    names = [f["name"] for f in figures["faults"]]
    assert sorted(names) == ["database_cut", "redis_restart"], names
    for fault in figures["faults"]:
        assert fault["survived"], fault
        assert fault["injected_at_s"] < fault["restored_at_s"] <= fault["recovered_at_s"], fault
        assert fault["details"]["probe_state"] == "SUCCEEDED", fault
    assert figures["faults_injected"] == figures["faults_survived"] == 2
    growth = figures["growth"]
    assert growth["queues_at_end"] == {"web": 0, "gpu.cpu": 0, "unacked": 0}, growth["leftover_messages"]
    assert growth["engines_left"] == 0
    assert figures["pages"]["requests"] > 10 and figures["pages"]["p95_ms"] > 0
    assert done.returncode == 0 and figures["ok"], growth
