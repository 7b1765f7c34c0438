"""Read every group at once: all the bad variables are reported together, each by its name."""
import os
from pathlib import Path

from pydantic import BaseModel, ValidationError

from runners.envvars import EnvVarError

from .alerts import Alerts
from .broker import Broker
from .database import Database
from .fields import WITHOUT_VALUE, Group
from .github import GitHub
from .gitlab import GitLab
from .metrics import Metrics
from .regressions import Regressions
from .retention import Retention
from .statuses import Statuses
from .storage import Storage
from .web import Web
from .workers import Shared, Workers

# In the reference's order.
GROUPS = {"web": Web, "database": Database, "broker": Broker, "storage": Storage, "workers": Workers,
          "github": GitHub, "gitlab": GitLab, "statuses": Statuses, "alerts": Alerts, "regressions": Regressions,
          "retention": Retention, "metrics": Metrics}

# pydantic's error types in the words runners.envvars uses; a bound shows the value as a number.
PHRASES = {"int_parsing": "is not an integer", "int_from_float": "is not an integer", "float_parsing": "is not a number",
           "finite_number": "is not a finite number", "literal_error": "expected one of {expected}",
           "greater_than_equal": "must be at least {ge}", "greater_than": "must be above {gt}"}
BOUNDS = {"greater_than_equal", "greater_than"}


class ConfigError(ValueError):
    """One or more variables hold a bad value: one line each, naming the variable."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("bad configuration (docs/configuration.md):\n  " + "\n  ".join(problems))


class Config(BaseModel):
    """The whole configuration, one group per subsystem; folders resolved under var_dir."""
    base_dir: Path
    web: Web
    database: Database
    broker: Broker
    storage: Storage
    workers: Workers
    github: GitHub
    gitlab: GitLab
    statuses: Statuses
    alerts: Alerts
    regressions: Regressions
    retention: Retention
    metrics: Metrics
    shared: Shared

    @property
    def var_dir(self) -> Path:
        return self.web.var_dir or self.base_dir / "var"

    @property
    def artifacts_dir(self) -> Path:
        return self.storage.folder or self.var_dir / "artifacts"

    @property
    def tiny_model_dir(self) -> Path:
        return self.web.tiny_model_dir or self.var_dir / "tiny-model"


def load(base_dir: Path) -> Config:
    """The configuration from os.environ; BASE_DIR: the checkout (the default BENCH_VAR_DIR is under it).
    Raises ConfigError listing every bad variable."""
    groups, problems = {}, []
    for key, group in GROUPS.items():
        try:
            groups[key] = read_group(group)
        except ConfigError as exc:
            problems += exc.problems
    var_dir = getattr(groups.get("web"), "var_dir", None) or base_dir / "var"
    try:
        shared = Shared.read(os.environ, var_dir)
    except EnvVarError as exc:
        problems.append(str(exc))
    if problems:
        raise ConfigError(problems)
    return Config(base_dir=base_dir, shared=shared, **groups)


def read_group(group: type[Group]) -> Group:
    """One group from os.environ; ConfigError lists its bad variables."""
    try:
        return group()
    except ValidationError as exc:
        raise ConfigError([describe(error) for error in exc.errors()]) from None


def describe(error) -> str:
    """One of pydantic's errors as a line that names the variable and its value."""
    if not error["loc"]:  # a rule between settings, which names its variables itself
        return error["msg"]
    name = str(error["loc"][0])
    if error["type"] == WITHOUT_VALUE:
        return f"{name}: {error['msg']}"
    raw = os.environ.get(name)
    phrase = PHRASES.get(error["type"], error["msg"]).format(**error.get("ctx", {}))
    return f"{name}={raw if error['type'] in BOUNDS else repr(raw)} {phrase}"
