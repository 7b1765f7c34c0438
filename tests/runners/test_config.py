"""RunnerConfig: the runners' settings read once, and the engine's explicit environment."""
import ast
from pathlib import Path

import pytest

from runners.builder.config import BuildConfig
from runners.config import DEFAULT_CACHE_BYTES, RunnerConfig, host_allowed
from runners.engine import Engine, EngineSpec
from runners.envvars import EnvVarError

ROOT = Path(__file__).resolve().parents[2]

# What a GPU worker's environment holds beside what vLLM needs: none of it may reach an engine.
SECRETS = {
    "CELERY_BROKER_URL": "redis://:hunter2@redis:6379/0",
    "CELERY_RESULT_BACKEND": "redis://:hunter2@redis:6379/1",
    "DATABASE_URL": "postgres://bench:hunter2@db/bench",
    "DJANGO_SECRET_KEY": "django-secret",
    "BENCH_ARTIFACTS_S3_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "BENCH_ARTIFACTS_S3_SECRET_ACCESS_KEY": "s3-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE2",
    "BENCH_GITHUB_TOKEN": "ghp_example",
    "BENCH_ALERT_SECRET": "alert-secret",
    "BENCH_SECRET_VLLM": "webhook-secret",
    "GITHUB_TOKEN": "ghp_other",
    "HF_TOKEN": "hf_example",
    "HUGGING_FACE_HUB_TOKEN": "hf_example2",
    "POSTGRES_PASSWORD": "hunter2",
    "REDIS_URL": "redis://:hunter2@redis:6379/0",
    "VLLM_API_KEY": "would-lock-the-probes-out",
    "NCCL_SECRET_TOKEN": "even-under-an-allowed-prefix",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "OPENAI_API_KEY": "sk-example",
}
# What vLLM, torch, CUDA, NCCL and the OS need from the host.
NEEDED = {
    "PATH": "/usr/local/cuda/bin:/usr/bin:/bin",
    "HOME": "/home/bench",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TMPDIR": "/scratch/tmp",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
    "LD_PRELOAD": "/usr/lib/libtcmalloc_minimal.so.4",
    "PYTHONPATH": "/opt/site",
    "VIRTUAL_ENV": "/opt/vllm",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "CUDA_HOME": "/usr/local/cuda",
    "NCCL_DEBUG": "INFO",
    "NCCL_SOCKET_IFNAME": "eth0",
    "VLLM_CPU_KVCACHE_SPACE": "4",
    "VLLM_ATTENTION_BACKEND": "FLASH_ATTN",
    "TORCH_CUDA_ARCH_LIST": "9.0",
    "OMP_NUM_THREADS": "8",
    "HF_HOME": "/data/hf",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRITON_CACHE_DIR": "/scratch/triton",
}


def host(**more) -> dict:
    return {**NEEDED, **SECRETS, "UNRELATED_TOOL_SETTING": "x", **more}


def test_defaults_from_an_empty_environment():
    config = RunnerConfig.from_env({})
    assert config.work_dir == Path("var/work")
    assert config.cache_dir == Path("var/work/build-cache").absolute()
    assert (config.build_cache_max_bytes, config.vllm_base_ref, config.source_build_command) == (
        DEFAULT_CACHE_BYTES, "", None)
    assert (config.allow_file_repos, config.vllm_command, config.engine_cpu) == (False, (), None)
    assert (config.engine_guard_grace_s, config.engine_record_dir, config.probe_timeout_s) == (10.0, None, 120.0)
    assert (config.comm_health_check, config.comm_health_bytes) == (None, 1 << 20)
    assert dict(config.host_env) == {}


def test_every_variable_is_read():
    config = RunnerConfig.from_env({
        "BENCH_WORK_DIR": "/w", "BENCH_BUILD_CACHE_MAX_GB": "1.5", "BENCH_VLLM_BASE_REF": " v0.32.0 ",
        "BENCH_SOURCE_BUILD_COMMAND": '["pip", "install", "{src}"]', "BENCH_ALLOW_FILE_REPOS": "yes",
        "BENCH_VLLM_COMMAND": "/opt/venv/bin/python -m vllm.entrypoints.cli.main", "BENCH_ENGINE_CPU": "0",
        "BENCH_ENGINE_GUARD_GRACE_S": "2.5", "BENCH_ENGINE_RECORD_DIR": "/w/engines",
        "BENCH_ENGINE_PASS_ENV": "MY_PROXY, FAKE_*", "BENCH_PROBE_TIMEOUT_S": "2",
        "BENCH_COMM_HEALTH_CHECK": "on", "BENCH_COMM_HEALTH_BYTES": "4096"})
    assert config.cache_dir == Path("/w/build-cache")  # one default: beside the job folders
    assert config.build_cache_max_bytes == int(1.5 * 1024**3) and config.vllm_base_ref == "v0.32.0"
    assert config.source_build_command == ("pip", "install", "{src}") and config.allow_file_repos is True
    assert config.vllm_command == ("/opt/venv/bin/python", "-m", "vllm.entrypoints.cli.main")
    assert config.engine_cpu is False and config.engine_guard_grace_s == 2.5
    assert config.engine_record_dir == Path("/w/engines") and config.engine_pass_env == ("MY_PROXY", "FAKE_*")
    assert config.probe_timeout_s == 2.0 and config.comm_health_check is True and config.comm_health_bytes == 4096
    assert RunnerConfig.from_env({"BENCH_WORK_DIR": "/w", "BENCH_BUILD_CACHE_DIR": "/c"}).cache_dir == Path("/c")
    build = BuildConfig.from_runner_config(config)
    assert (build.cache_dir, build.base_ref, build.source_build_command, build.allow_file_urls) == (
        Path("/w/build-cache"), "v0.32.0", ["pip", "install", "{src}"], True)
    assert BuildConfig.from_runner_config(config, cache_dir=Path("/x")).cache_dir == Path("/x")


def test_overrides_win_and_the_object_is_frozen():
    config = RunnerConfig.from_env({"BENCH_WORK_DIR": "/w"}, work_dir=Path("/django/work"))
    assert config.cache_dir == Path("/django/work/build-cache")
    with pytest.raises(AttributeError):
        config.probe_timeout_s = 1  # type: ignore[misc]
    assert config.replace(probe_timeout_s=1.0).probe_timeout_s == 1.0 and config.probe_timeout_s == 120.0


@pytest.mark.parametrize("name, raw, fragment", [
    ("BENCH_PROBE_TIMEOUT_S", "soon", "is not a number"),
    ("BENCH_PROBE_TIMEOUT_S", "0.1", "must be at least 0.5"),
    ("BENCH_ENGINE_CPU", "gpu", "not a boolean or auto"),
    ("BENCH_ALLOW_FILE_REPOS", "maybe", "not a boolean"),
    ("BENCH_BUILD_CACHE_MAX_GB", "lots", "not a number"),
    ("BENCH_SOURCE_BUILD_COMMAND", "pip install", "JSON list of strings"),
    ("BENCH_COMM_HEALTH_CHECK", "sometimes", "BENCH_COMM_HEALTH_CHECK='sometimes'"),
    ("BENCH_COMM_HEALTH_BYTES", "6", "multiple of 4"),
    ("BENCH_ENGINE_GUARD_GRACE_S", "-1", "at least 0"),
])
def test_a_bad_value_is_named(name, raw, fragment):
    with pytest.raises(EnvVarError, match=fragment):
        RunnerConfig.from_env({name: raw})


def test_engine_env_has_what_vllm_needs_and_no_worker_secret():
    config = RunnerConfig.from_env(host())
    env = config.engine_env({"NCCL_PROTO": "LL", "VLLM_CPU_KVCACHE_SPACE": "2"})
    assert not set(SECRETS) & set(env)
    assert not any(value in env.values() for value in SECRETS.values())
    assert {k: env[k] for k in NEEDED if k != "VLLM_CPU_KVCACHE_SPACE"} == {
        k: v for k, v in NEEDED.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2" and env["NCCL_PROTO"] == "LL"  # the job's values win
    assert "UNRELATED_TOOL_SETTING" not in env


def test_the_engine_process_environment_for_a_job(tmp_path):
    """What Engine would start vLLM with, built from a worker environment with planted secrets."""
    config = RunnerConfig.from_env(host(BENCH_ENGINE_CPU="1"))
    spec = EngineSpec(model="/m", vllm_command=["vllm"], env={"NCCL_ALGO": "Ring"}, log_path=tmp_path / "log")
    engine = Engine(spec, config=config)
    env = engine.build_env()
    assert not set(SECRETS) & set(env) and not any(k.startswith(("BENCH_", "CELERY_", "DJANGO_")) for k in env)
    for name in ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "HF_HOME", "TMPDIR"):
        assert env[name] == NEEDED[name]
    assert env["NCCL_ALGO"] == "Ring" and env["VLLM_NO_USAGE_STATS"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "4"  # the host's beat the defaults
    assert engine.env_overrides == {"NCCL_ALGO": "Ring", "VLLM_NO_USAGE_STATS": "1",
                                    "VLLM_CPU_OMP_THREADS_BIND": "auto", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    guard = engine.guard_command(env)
    assert guard[guard.index("--grace") + 1] == "10.0"


def test_extra_host_variables_pass_by_name_but_secrets_never_do():
    config = RunnerConfig.from_env(host(BENCH_ENGINE_PASS_ENV="MY_PROXY,FAKE_ENGINE_*,DATABASE_URL,HF_*",
                                        MY_PROXY="http://proxy:3128", FAKE_ENGINE_MODE="hang"))
    env = config.engine_env()
    assert env["MY_PROXY"] == "http://proxy:3128" and env["FAKE_ENGINE_MODE"] == "hang"
    assert "DATABASE_URL" not in env and "HF_TOKEN" not in env and "HUGGING_FACE_HUB_TOKEN" not in env
    assert host_allowed("NCCL_IB_HCA") and not host_allowed("NCCL_SECRET_TOKEN") and not host_allowed("BENCH_WORK_DIR")
    assert host_allowed("TOKENIZERS_PARALLELISM") and host_allowed("CCL_WORKER_COUNT") and not host_allowed("HF_TOKEN")


def test_the_job_threads_one_config_to_the_engine(monkeypatch, tmp_path):
    """run_job passes its RunnerConfig on: the engine is started with that config's host env."""
    from runners import job

    seen = {}

    class Stop(Exception):
        pass

    def fake_engine(spec, config=None):
        seen["config"], seen["env"] = config, dict(spec.env)
        raise Stop

    monkeypatch.setattr(job, "Engine", fake_engine)
    config = RunnerConfig.from_env(host(BENCH_ENGINE_CPU="1"))
    spec = {"model": str(tmp_path), "prompt": "hi", "max_tokens": 4, "repeats": 1, "probes": ["decode"],
            "engine_env": {"NCCL_PROTO": "Simple"}}
    with pytest.raises(job.JobError):
        job.run_job(spec, work_dir=tmp_path / "work", runner_config=config)
    assert seen["config"] is config and seen["env"] == {"NCCL_PROTO": "Simple"}


# Where runners/ may still touch os.environ, and why. Every BENCH_* setting is RunnerConfig's.
OS_ENVIRON_ALLOWED = {
    "config.py": "RunnerConfig.from_env(): the one reader of the runners' settings",
    "envvars.py": "the typed readers' default mapping (the web side's settings read through them)",
    "build/git.py": "git runs with the host's environment less git's own GIT_* overrides",
    "build/gnu_patch.py": "patch runs with the host's environment and LC_ALL=C",
    "build/overlay.py": "overlay_env()'s default base for a library caller",
    "probes/comm.py": "a rank process sets torch.distributed's rendezvous variables for itself",
    "probes/comm_interleaved.py": "a rank process sets VLLM_SKIP_P2P_CHECK for itself",
}


def _allowed(rel: str) -> bool:
    rel = rel.replace("builder/", "build/")  # the folder's new name
    return rel in OS_ENVIRON_ALLOWED or rel.startswith("probes/comm/")


def test_runners_read_no_environment_below_the_entry_points():
    """No module of runners/ but those above reads (or writes) os.environ: the entry points build
    a RunnerConfig and pass it down."""
    offenders = []
    for path in sorted((ROOT / "runners").rglob("*.py")):
        rel = path.relative_to(ROOT / "runners").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            touches = (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv")
                       and isinstance(node.value, ast.Name) and node.value.id == "os")
            if touches and not _allowed(rel):
                offenders.append(f"runners/{rel}:{node.lineno}")
    assert offenders == [], "read the setting through RunnerConfig (runners/config.py) instead"


def test_the_engine_modules_hold_no_os_environ():
    for name in ("process.py", "args.py", "cpu.py", "orphans.py", "guard.py"):
        assert "os.environ" not in (ROOT / "runners" / "engine" / name).read_text(), name


def test_a_source_build_gets_the_allowed_environment():
    build = BuildConfig.from_runner_config(RunnerConfig.from_env(host(PIP_FIND_LINKS="/opt/wheels")))
    assert build.tool_env["PATH"] == NEEDED["PATH"] and build.tool_env["PIP_FIND_LINKS"] == "/opt/wheels"
    assert not set(SECRETS) & set(build.tool_env)
