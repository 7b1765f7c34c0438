"""A small process supervisor for `manage.py bench_demo`: children in their own sessions, a
dead one restarted (like systemd's Restart=on-failure), a crash loop given up on.

    StopSignals().install()
    sup = Supervisor({"web": [...], "worker-gpu": [...]}, log_dir, cwd, say=print)
    try: sup.start_all(); while True: sup.check(); time.sleep(2)
    except KeyboardInterrupt: pass
    finally: sup.stop_all()
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

    def stop_all(self, timeout_s: float = 20) -> None:
        """SIGTERM every child's group; SIGKILL what is left after TIMEOUT_S in all (a Celery
        worker's warm shutdown waits for its task), and whatever a child left in its group."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():
            self._reap_group(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.say(f"process {proc.pid} survived SIGKILL")


class StopSignals:
    """SIGINT and SIGTERM handler: the first raises KeyboardInterrupt (leave the main loop and
    stop the children); the next ones are only counted, so that they never interrupt that
    clean-up halfway. A terminal's Ctrl-C reaches make and its child alike, and GNU make passes
    a SIGTERM on to its child: a supervisor started by make gets the signal twice."""

    def __init__(self):
        self.received = 0

    def install(self) -> "StopSignals":
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self)
        return self

    def __call__(self, signum, frame):
        self.received += 1
        if self.received == 1:
            raise KeyboardInterrupt

