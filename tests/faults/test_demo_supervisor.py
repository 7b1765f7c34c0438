"""`make run` (manage.py bench_demo) keeps its children alive like a process supervisor: a
GPU worker killed with SIGKILL is restarted, the web and the other worker stay up. And it
stops, all of it, on the first SIGTERM or Ctrl-C to its process group, and on a second one."""
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from benchsite.bench.worker.supervisor import MAX_RESTARTS, CrashLoop, StopSignals, Supervisor
from tests.conftest import ROOT

from .harness import FAKE_ENGINE, free_port, wait_until


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


def test_stop_all_kills_what_ignores_sigterm_and_a_second_signal_never_interrupts_it(tmp_path):
    sup = Supervisor({"stubborn": [sys.executable, "-c", "import signal, time; "
                                   "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                                   "time.sleep(120)"]}, tmp_path, tmp_path, say=print)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop = StopSignals().install()
    try:
        sup.start_all()
        wait_until(lambda: "up" in (tmp_path / "stubborn.log").read_text(), 30, "the child")
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # the first: leave the main loop
        t0 = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)  # the second (make passes SIGTERM on; Ctrl-C again): counted only
        sup.stop_all(timeout_s=2)
        assert stop.received == 2 and time.monotonic() - t0 < 10
        assert sup.procs["stubborn"].returncode == -signal.SIGKILL
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sup.stop_all(timeout_s=1)


def _demo_processes(mark: str) -> list[str]:
    """Every process that inherited MARK in its environment: make, bench_demo, the web server,
    both Celery workers and their pool processes, beat, the engine."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "environ").read_bytes():
                stat = (entry / "stat").read_text()
                if stat[stat.rfind(")") + 2] != "Z":
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
        except OSError:
            continue
    return found


# `make run` as it is, but for the engine: the fake engine never gets healthy (its gate file never
# appears), so the GPU worker is busy starting it when the signal comes (the slowest case to stop).
# Ctrl-C twice, as a terminal sends it to the whole group: the first starts the graceful stop, the
# second comes while it runs. A first SIGTERM takes the same path (StopSignals treats both alike:
# test_stop_all_kills_what_ignores_sigterm_and_a_second_signal_never_interrupts_it).
@pytest.mark.timeout(300)
def test_make_run_stops_every_process_on_ctrl_c_twice_to_its_process_group(tmp_path, tiny_model_dir):
    signals = ("SIGINT", "SIGINT")
    make = shutil.which("make")
    assert make, "GNU make is needed (apt-get install make)"
    mark = f"demo-{uuid.uuid4().hex}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_URL"))},
           "BENCH_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
           "BENCH_TINY_MODEL_DIR": str(tiny_model_dir), "PYTHONUNBUFFERED": "1", "DEMO_TEST_MARK": mark,
           "BENCH_VLLM_COMMAND": f"{sys.executable} {FAKE_ENGINE}", "BENCH_ENGINE_CPU": "0",
           "BENCH_ENGINE_PASS_ENV": "FAKE_ENGINE_*,DEMO_TEST_MARK", "FAKE_ENGINE_GATE": str(tmp_path / "never")}
    out = open(tmp_path / "make.out", "wb")
    # The Makefile's own `run` target; `-o` keeps make from reinstalling the virtual environment.
    demo = subprocess.Popen([make, "run", f"PY={sys.executable}", "-o", ".venv/.installed", f"PORT={free_port()}"],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    logs = tmp_path / "logs"
    explain = lambda: (tmp_path / "make.out").read_text() + "".join(  # noqa: E731
        f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in logs.glob("*.log")) + f"\nleft: {_demo_processes(mark)}"
    try:
        wait_until(lambda: any("fake_engine.py" in cmd for cmd in _demo_processes(mark)), 180,
                   "the demo run to start its engine", explain=explain)
        wait_until(lambda: "Dashboard:" in (tmp_path / "make.out").read_text(), 60, "the dashboard", explain=explain)
        t0 = time.monotonic()
        for i, name in enumerate(signals):
            if i:
                time.sleep(1)  # the second Ctrl-C, while the children are being stopped
            os.killpg(demo.pid, getattr(signal, name))  # as a terminal does: the whole foreground group
        _, took = wait_until(lambda: not _demo_processes(mark), 30, "every process of the demo to exit",
                             explain=explain, interval_s=0.5)
        demo.wait(timeout=5)
        text = (tmp_path / "make.out").read_text()
        assert "Traceback" not in text, text
        print(f"{'+'.join(signals)}: every process gone {time.monotonic() - t0:.1f} s after the first signal")
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
        for pid in [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]:
            try:
                if mark.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
