"""A small process supervisor for `manage.py bench_demo`: children in their own sessions, a
dead one restarted (like systemd's Restart=on-failure), a crash loop given up on.

    sup = Supervisor({"web": [...], "worker-gpu": [...]}, log_dir, cwd, say=print)
    sup.start_all(); while True: sup.check(); time.sleep(2)
"""
import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path

from runners.engine.guard import describe_rc

MAX_RESTARTS = 5  # within RESTART_WINDOW_S, then the supervisor gives up on the child
RESTART_WINDOW_S = 60.0


class CrashLoop(RuntimeError):
    """A child died too often in too short a time: restarting it again would not help."""


class Supervisor:
    def __init__(self, commands: dict[str, list[str]], log_dir: Path, cwd: Path, say=print):
        self.commands, self.log_dir, self.cwd, self.say = commands, log_dir, cwd, say
        self.procs: dict[str, subprocess.Popen] = {}
        self.restarts: dict[str, deque] = {name: deque() for name in commands}

    def start(self, name: str) -> None:
        with open(self.log_dir / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(self.commands[name], cwd=self.cwd, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                # its own group, our session: see runners.engine.process
                                                process_group=0)

    def start_all(self) -> None:
        for name in self.commands:
            self.start(name)

    def check(self) -> list[str]:
        """Restart every child that exited; return their names. CrashLoop past MAX_RESTARTS."""
        restarted = []
        for name, proc in list(self.procs.items()):
            if proc.poll() is None:
                continue
            now = time.monotonic()
            recent = self.restarts[name]
            while recent and now - recent[0] > RESTART_WINDOW_S:
                recent.popleft()
            if len(recent) >= MAX_RESTARTS:
                raise CrashLoop(f"{name} exited {len(recent) + 1} times within {RESTART_WINDOW_S:.0f} s (last: "
                                f"{describe_rc(proc.returncode)}); see {self.log_dir / (name + '.log')}")
            self._reap_group(proc.pid)
            recent.append(now)
            self.say(f"{name} exited with {describe_rc(proc.returncode)}: restarting it "
                     f"({len(recent)} of {MAX_RESTARTS} restarts allowed per {RESTART_WINDOW_S:.0f} s)")
            self.start(name)
            restarted.append(name)
        return restarted

    @staticmethod
    def _reap_group(pgid: int) -> None:
        """What the dead child left in its session (a Celery pool process) goes with it."""
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def stop_all(self, timeout_s: float = 30) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

