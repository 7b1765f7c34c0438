"""The engine runner: argument checks, then the process life cycle, on a fake and on real vLLM."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from runners.engine import process as engine_module
from runners.engine import (
    Engine,
    EngineError,
    EngineSpec,
    cpu_thread_binding,
    validate_args,
    validate_env,
)
from runners.engine.guard import group_exists


def group_gone(pgid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


# ------------------------------------------------------------------ validation

@pytest.mark.parametrize("args", [
    [],
    ["--enforce-eager"],
    ["--enforce-eager", "--dtype", "float32"],
    ["--dtype=float32", "--enforce-eager"],
    ["--profiler-config", '{"profiler": "torch", "torch_profiler_with_stack": false}'],
    ["--seed", "-1"],
])
def test_valid_args(args):
    validate_args(args)


@pytest.mark.parametrize("args, fragment", [
    ("--enforce-eager", "list of strings"),
    (["--seed", 1], "strings"),
    (["model"], "neither a --flag"),
    (["--enforce-eager", "--dtype", "float32", "extra"], "neither a --flag"),
    (["--dtype=float32", "bfloat16"], "neither a --flag"),
    (["-tp", "2"], "long flags"),
    (["-O3"], "long flags"),
    (["--"], "bare"),
    (["--enforce-eager", "--", "model"], "bare"),
    (["--enforce-eager", "-O3"], "long flags"),
    (["--seed", "-x"], "long flags"),
    (["--dtype", "float32\n--trust-remote-code"], "newline"),
    (["--dtype\0"], "NUL"),
    (["--port", "80"], "EngineSpec field"),
    (["--tensor-parallel-size=2"], "EngineSpec field"),
    (["--served_model_name", "x"], "EngineSpec field"),
    (["--bad flag"], "not a valid flag name"),
])
def test_invalid_args(args, fragment):
    with pytest.raises(ValueError, match=fragment):
        validate_args(args)


def test_spec_validates():
    with pytest.raises(ValueError, match="list of strings"):
        EngineSpec(model="m", args="--enforce-eager")
    with pytest.raises(ValueError, match="must match"):
        EngineSpec(model="m", env={"lower": "1"})
    with pytest.raises(ValueError, match="must match"):
        EngineSpec(model="m", env={"A=B": "1"})
    with pytest.raises(ValueError, match="must be a string"):
        EngineSpec(model="m", env={"NCCL_PROTO": 1})
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        EngineSpec(model="m", tensor_parallel_size=0)
    validate_env({"NCCL_PROTO": "LL", "_X1": ""})


def test_cpu_thread_binding():
    assert cpu_thread_binding(1) == "auto"
    assert cpu_thread_binding(2, [0, 1]) == "0|1"
    assert cpu_thread_binding(2, [0, 1, 2, 3]) == "0-1|2-3"
    assert cpu_thread_binding(3, [0, 1, 2, 3]) == "0-1|2|3"
    assert cpu_thread_binding(2, [0, 2, 4, 6]) == "0,2|4,6"
    with pytest.raises(ValueError, match="needs at least 4"):
        cpu_thread_binding(4, [0, 1])


def test_command_and_env_on_cpu(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the caller's environment beats the defaults
    spec = EngineSpec(model="/m", tensor_parallel_size=2, cpu=True, vllm_command=["vllm"],
                      args=["--max_num_seqs=2", "--enforce-eager"], env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    engine = Engine(spec)
    cmd = engine.build_command(8123)
    assert cmd[:4] == ["vllm", "serve", "/m", "--host"]
    assert cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--max-model-len") + 1] == "1024"
    assert "--max-num-seqs" not in cmd and "--max_num_seqs=2" in cmd
    assert cmd[cmd.index("--distributed-executor-backend") + 1] == "mp"
    assert cmd[-2:] == ["--max_num_seqs=2", "--enforce-eager"]
    env = engine.build_env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"  # the spec beats everything
    assert env["HF_HUB_OFFLINE"] == "0"
    assert env["VLLM_NO_USAGE_STATS"] == "1"
    assert "|" in env["VLLM_CPU_OMP_THREADS_BIND"] or len(os.sched_getaffinity(0)) < 2
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in engine.env_overrides  # TP>1 keeps its processes


def test_tp1_cpu_model_runs_in_the_engine_core_process(monkeypatch):
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    env = Engine(EngineSpec(model="/m", cpu=True, vllm_command=["vllm"])).build_env()
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # the caller's environment wins
    assert Engine(EngineSpec(model="/m", cpu=True, vllm_command=["vllm"])).build_env()["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in Engine(EngineSpec(model="/m", cpu=False)).build_env()


def test_command_not_on_cpu(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    spec = EngineSpec(model="/m", tensor_parallel_size=2, cpu=False, vllm_command=["vllm"])
    engine = Engine(spec)
    cmd = engine.build_command(1)
    assert "--max-model-len" not in cmd and "--distributed-executor-backend" not in cmd
    assert "VLLM_CPU_OMP_THREADS_BIND" not in engine.build_env()


def test_vllm_command_from_environment(monkeypatch):
    monkeypatch.setenv("BENCH_VLLM_COMMAND", "/opt/venv/bin/python -m vllm.entrypoints.cli.main")
    cmd = Engine(EngineSpec(model="/m", cpu=False)).build_command(1)
    assert cmd[:4] == ["/opt/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "serve"]
    monkeypatch.delenv("BENCH_VLLM_COMMAND")
    assert Engine(EngineSpec(model="/m", cpu=False)).build_command(1)[:3] == [
        sys.executable, "-m", "vllm.entrypoints.cli.main"]


# ---------------------------------------------------------- life cycle, fake vLLM

def fake_spec(fake_vllm_command, tmp_path, mode="ok", **kw):
    env = {"FAKE_VLLM_MODE": mode, "BENCH_ENGINE_GUARD_GRACE_S": "2", **kw.pop("env", {})}
    return EngineSpec(model="/fake", vllm_command=fake_vllm_command, env=env,
                      log_path=tmp_path / "server.log", **kw)


def test_fake_engine_life_cycle(fake_vllm_command, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "WAIT_CALLBACK_EVERY_S", 0.5)
    waits = []
    spec = fake_spec(fake_vllm_command, tmp_path, mode="child", env={"FAKE_VLLM_DELAY": "2"},
                     stop_timeout_s=2)
    with Engine(spec, on_wait=waits.append) as engine:
        assert httpx.get(f"{engine.base_url}/health", trust_env=False).status_code == 200
        assert engine.version == "0.0.0+fake"
        assert 2 <= engine.startup_s < 30
        assert waits and "waiting for engine /health" in waits[0]
        engine.check_alive(health=True)
        pgid = engine.pgid
        # a process group of its own (stop() signals it), in our session: a session of its own
        # would be an autogroup whose share the engine core takes (see runners.engine.process)
        assert os.getpgid(engine.proc.pid) == pgid == engine.proc.pid != os.getpgid(0)
        assert os.getsid(engine.proc.pid) == os.getsid(0)
        assert "fake vllm listening" in engine.log_tail()
        assert engine.log_tail().startswith("# engine command: ")
    # the grandchild ignores SIGTERM: stop() must escalate to SIGKILL for the group
    assert group_gone(pgid, timeout=5)
    assert not engine.running
    engine.stop()  # idempotent


def test_stop_escalates_to_sigkill(fake_vllm_command, tmp_path):
    spec = fake_spec(fake_vllm_command, tmp_path, mode="stubborn", stop_timeout_s=1)
    engine = Engine(spec)
    engine.start()
    pgid = engine.pgid
    t0 = time.monotonic()
    engine.stop()
    assert time.monotonic() - t0 < 10
    assert engine.returncode == -signal.SIGKILL
    assert group_gone(pgid, timeout=5)


def test_exit_during_startup_is_reported(fake_vllm_command, tmp_path):
    with pytest.raises(EngineError, match="exited during start-up with code 2") as info:
        Engine(fake_spec(fake_vllm_command, tmp_path, mode="exit")).start()
    assert "unrecognized arguments: --no-such-flag" in info.value.log_tail
    assert info.value.returncode == 2


def test_startup_timeout(fake_vllm_command, tmp_path):
    engine = Engine(fake_spec(fake_vllm_command, tmp_path, mode="hang", startup_timeout_s=2))
    with pytest.raises(EngineError, match="not healthy after 2 s"):
        engine.start()
    assert not engine.running
    assert engine.returncode is not None


def test_bad_guard_grace_is_refused_before_anything_starts(fake_vllm_command, tmp_path):
    engine = Engine(fake_spec(fake_vllm_command, tmp_path, env={"BENCH_ENGINE_GUARD_GRACE_S": "soon"}))
    with pytest.raises(ValueError, match="BENCH_ENGINE_GUARD_GRACE_S='soon' is not a number"):
        engine.start()
    assert engine.proc is None


def test_guard_command_line():
    from runners.engine.guard import parse_guard_argv
    assert parse_guard_argv(["--guard", "12", "--grace", "2.5", "--", "vllm", "serve"]) == (12, 2.5, ["vllm", "serve"])
    assert parse_guard_argv(["--guard", "12", "--", "vllm"]) == (12, 10.0, ["vllm"])
    assert parse_guard_argv(["--guard", "12", "--grace", "x", "--", "vllm"]) is None
    assert parse_guard_argv(["--guard", "pid", "--", "vllm"]) is None
    assert parse_guard_argv(["--guard", "12", "--"]) is None


def test_interrupt_during_startup_stops_the_engine(fake_vllm_command, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "WAIT_CALLBACK_EVERY_S", 0.5)
    class Interrupted(BaseException):  # like KeyboardInterrupt or Celery's SoftTimeLimitExceeded
        pass

    def on_wait(message):
        raise Interrupted()

    engine = Engine(fake_spec(fake_vllm_command, tmp_path, mode="hang"), on_wait=on_wait)
    with pytest.raises(Interrupted):
        engine.start()
    assert not engine.running


def test_killed_fake_engine_is_reported(fake_vllm_command, tmp_path):
    with Engine(fake_spec(fake_vllm_command, tmp_path)) as engine:
        os.killpg(engine.pgid, signal.SIGKILL)
        engine.proc.wait(timeout=10)
        with pytest.raises(EngineError, match="engine exited with signal SIGKILL") as info:
            engine.check_alive()
        assert "fake vllm listening" in info.value.log_tail


HARD_KILLED_OWNER = textwrap.dedent("""
    import sys, time
    from runners.engine import Engine, EngineSpec
    spec = EngineSpec(**__import__("json").loads(sys.argv[1]))
    engine = Engine(spec)
    engine.start()
    print(engine.pgid, flush=True)
    time.sleep(600)
""")


def run_owner_and_kill_it(spec_kwargs: dict, timeout: float) -> int:
    """Start an engine from a child Python, SIGKILL that Python, return the engine's pgid."""
    owner = subprocess.Popen([sys.executable, "-c", HARD_KILLED_OWNER, json.dumps(spec_kwargs)],
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[3])
    try:
        line = owner.stdout.readline()
        assert line.strip().isdigit(), f"engine owner printed {line!r}"
        pgid = int(line)
        os.kill(owner.pid, signal.SIGKILL)  # like Celery's hard time limit
        owner.wait()
        assert group_gone(pgid, timeout=timeout), "the engine outlived its hard-killed owner"
        return pgid
    finally:
        owner.kill()


def test_engine_dies_with_its_hard_killed_owner(fake_vllm_command, tmp_path):
    # mode "child": a grandchild that ignores SIGTERM, like an engine core that lingers
    run_owner_and_kill_it({"model": "/fake", "vllm_command": fake_vllm_command,
                           "env": {"FAKE_VLLM_MODE": "child", "BENCH_ENGINE_GUARD_GRACE_S": "2"},
                           "log_path": str(tmp_path / "server.log")}, timeout=10)
    assert "the runner is gone" in (tmp_path / "server.log").read_text()


def test_guard_cleans_up_after_a_crashed_server(fake_vllm_command, tmp_path):
    # the API server dies, its child lingers: the guard exits with the server's status and
    # leaves nothing of the group behind
    with Engine(fake_spec(fake_vllm_command, tmp_path, mode="child")) as engine:
        pgid = engine.pgid
        # the group leader is the guard; the server is its child
        server_pid = int(subprocess.run(["pgrep", "-P", str(pgid)],
                                        capture_output=True, text=True).stdout.split()[0])
        os.kill(server_pid, signal.SIGKILL)
        engine.proc.wait(timeout=10)
        with pytest.raises(EngineError, match="signal SIGKILL"):
            engine.check_alive()
        # at once: the orphaned grandchild was the guard's to reap (it is their subreaper), not
        # a zombie waiting for init
        assert not group_exists(pgid)


# ----------------------------------------------------------------- real vLLM
# The shared engine (tests/conftest.py) serves the read-only checks. A bad flag and an engine
# killed mid-run are exercised through the whole service in tests/e2e.

REAL_ARGS = ["--enforce-eager"]


@pytest.mark.engine
def test_real_engine_serves(shared_engine):
    assert shared_engine.version and shared_engine.version[0].isdigit()
    assert shared_engine.startup_s > 0
    members = subprocess.run(["pgrep", "-g", str(shared_engine.pgid)], capture_output=True, text=True).stdout.split()
    assert len(members) >= 3  # the guard, the API server and the engine core, all in one group
    with httpx.Client(base_url=shared_engine.base_url, trust_env=False, timeout=120) as client:
        assert client.get("/health").status_code == 200
        body = {"model": "bench-model", "prompt": "def main(argv):\n", "max_tokens": 16,
                "temperature": 0, "ignore_eos": True}
        first = client.post("/v1/completions", json=body).json()
        second = client.post("/v1/completions", json=body).json()
    assert first["usage"]["completion_tokens"] == 16
    assert first["choices"][0]["text"] == second["choices"][0]["text"]  # greedy is repeatable
    shared_engine.check_alive(health=True)


@pytest.mark.engine
def test_real_engine_dies_with_its_hard_killed_owner(tiny_model_dir, tmp_path):
    # vLLM's engine core outlives a SIGKILLed API server by itself: the guard must stop it
    run_owner_and_kill_it({"model": str(tiny_model_dir), "args": REAL_ARGS,
                           "log_path": str(tmp_path / "server.log")}, timeout=30)
    log = (tmp_path / "server.log").read_text()
    assert "Application startup complete" in log  # vLLM itself came up before its owner died
    assert "the runner is gone; stopping the engine" in log
