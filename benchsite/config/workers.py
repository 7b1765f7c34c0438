"""The run life cycle between the web side and the GPU workers: heartbeats, the reaper, claims,
results. The settings the web side shares with the runners are theirs (runners/config.py)."""
from pathlib import Path
from typing import Mapping

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError

from runners import config as runner_config

from .fields import Flag, Group, env


class Workers(Group):
    title = "Workers and the reaper"
    about = ("A run whose heartbeat is older than its timeout is failed by the reaper (or re-queued once); a "
             "QUEUED run whose message was lost is sent again. GPU workers need these too.")

    heartbeat_interval_s: int = env("BENCH_HEARTBEAT_INTERVAL_S", 20, "how often a GPU worker sends its heartbeat "
                                    "(its runs' and its own)", ge=1)
    heartbeat_timeout_s: int = env("BENCH_HEARTBEAT_TIMEOUT_S", 300, "a running run silent this long is failed by the "
                                   "reaper; at least twice the interval", ge=2)
    log_interval_s: int = env("BENCH_LOG_INTERVAL_S", 3, "how often the GPU worker sends a run's growing log tail "
                              "(build and engine, the last 64 KB); the run page shows it live", ge=1)
    worker_seen_timeout_s: int = env("BENCH_WORKER_SEEN_TIMEOUT_S", 90, "a pool whose workers were all silent this "
                                     "long is not served: a trigger on it needs a confirmation", ge=1)
    reaper_interval_s: int = env("BENCH_REAPER_INTERVAL_S", 60, "how often the beat reaps and re-sends lost runs", ge=1)
    reaper_requeue: Flag = env("BENCH_REAPER_REQUEUE", False, "re-queue a run whose worker was lost, once, "
                               "instead of failing it")
    requeue_lost_after_s: int = env("BENCH_REQUEUE_LOST_AFTER_S", 600, "a QUEUED run this old whose message is in no "
                                    "queue (a broker restarted without its data) is sent again", ge=1)
    claim_timeout_s: int = env("BENCH_CLAIM_TIMEOUT_S", 60, "a GPU worker's wait for its claim's answer; it retries "
                               "the run after half of it", ge=1)
    result_send_timeout_s: int = env("BENCH_RESULT_SEND_TIMEOUT_S", 3600, "how long a GPU worker retries a result "
                                     "while the broker is unreachable", ge=1)
    orphan_grace_s: int = env("BENCH_ORPHAN_GRACE_S", 10, "between SIGTERM and SIGKILL for an engine left behind by "
                              "a killed worker (stopped at the next start)", ge=0)

    @model_validator(mode="after")
    def _timeout_spans_two_beats(self) -> "Workers":
        if self.heartbeat_timeout_s < 2 * self.heartbeat_interval_s:
            raise PydanticCustomError(
                "env_rule", "BENCH_HEARTBEAT_TIMEOUT_S={timeout} must be at least twice BENCH_HEARTBEAT_INTERVAL_S="
                "{interval}, or a slow beat reaps a live run",
                {"timeout": self.heartbeat_timeout_s, "interval": self.heartbeat_interval_s})
        return self


class Shared(BaseModel):
    """The runners' variables that the web side reads too, through runners/config.py's readers."""
    work_dir: Path
    allow_file_repos: bool
    probe_modules: list[str]

    @classmethod
    def read(cls, environ: Mapping[str, str], var_dir: Path) -> "Shared":
        """Raises runners.envvars.EnvVarError, which names the variable."""
        modules = runner_config.read_probe_modules(environ)
        return cls(work_dir=runner_config.read_work_dir(environ, default=var_dir / "work"),
                   allow_file_repos=runner_config.read_allow_file_repos(environ),
                   probe_modules=[name.strip() for name in modules.split(",") if name.strip()])
