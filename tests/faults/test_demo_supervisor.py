"""`make run` (manage.py bench_demo) keeps its children alive like a process supervisor: a
GPU worker killed with SIGKILL is restarted, the web and the other worker stay up."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from benchsite.bench.supervisor import MAX_RESTARTS, CrashLoop, Supervisor
from tests.conftest import ROOT

from .harness import free_port, wait_until


def _children(parent: int) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == parent:
                found.append((int(entry.name), cmdline))
    return found


def test_supervisor_restarts_a_killed_child_and_gives_up_on_a_crash_loop(tmp_path):
    said = []
    sup = Supervisor({"sleeper": [sys.executable, "-c", "import time; time.sleep(60)"],
                      "crasher": [sys.executable, "-c", "raise SystemExit(3)"]}, tmp_path, tmp_path, say=said.append)
    sup.start_all()
    try:
        first = sup.procs["sleeper"].pid
        os.killpg(first, signal.SIGKILL)
        sup.procs["sleeper"].wait(timeout=10)
        sup.procs["crasher"].wait(timeout=10)
        assert sorted(sup.check()) == ["crasher", "sleeper"]
        assert sup.procs["sleeper"].pid != first and sup.procs["sleeper"].poll() is None
        assert "sleeper exited with signal SIGKILL: restarting it" in said[-2] + said[-1]
        with pytest.raises(CrashLoop, match=r"crasher exited \d+ times within 60 s \(last: code 3\)"):
            for _ in range(MAX_RESTARTS + 1):
                sup.procs["crasher"].wait(timeout=10)
                sup.check()
    finally:
        sup.stop_all(timeout_s=5)


@pytest.mark.timeout(180)
def test_make_run_restarts_a_gpu_worker_killed_with_sigkill(tmp_path, tiny_model_dir):
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_URL"))},
           "BENCH_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
           "BENCH_TINY_MODEL_DIR": str(tiny_model_dir), "PYTHONUNBUFFERED": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    out = open(tmp_path / "demo.out", "wb")
    demo = subprocess.Popen([sys.executable, "manage.py", "bench_demo", "--no-trigger", "--port", str(port)], cwd=ROOT,
                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    logs = tmp_path / "logs"
    explain = lambda: (tmp_path / "demo.out").read_text() + "".join(  # noqa: E731
        f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in logs.glob("*.log"))
    try:
        wait_until(lambda: "ready." in (logs / "worker-gpu.log").read_text() if (logs / "worker-gpu.log").exists()
                   else False, 90, "the GPU worker", explain=explain)
        [(gpu, _)] = [(pid, cmd) for pid, cmd in _children(demo.pid) if "gpu@" in cmd]
        os.killpg(gpu, signal.SIGKILL)
        wait_until(lambda: "worker-gpu exited with signal SIGKILL: restarting it" in (tmp_path / "demo.out").read_text(),
                   30, "the supervisor to restart the worker", explain=explain)
        wait_until(lambda: (logs / "worker-gpu.log").read_text().count("ready.") == 2, 90,
                   "the restarted GPU worker", explain=explain)
        assert demo.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
        assert [pid for pid, cmd in _children(demo.pid) if "gpu@" in cmd] != [gpu]
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
