"""GET /metrics for Prometheus (benchsite/metrics/, docs/operations.md "Metrics")."""
from pathlib import Path

from pydantic import field_validator
from pydantic_core import PydanticCustomError

from .fields import Group, Networks, env


class Metrics(Group):
    title = "Metrics"
    about = "`GET /metrics` answers a bearer token or an address in the allowed networks; with neither set, 404."

    token: str = env("BENCH_METRICS_TOKEN", "", "the bearer token that reads `/metrics` "
                     "(Prometheus' `authorization: {credentials: ...}`)", repr=False)
    allow: Networks = env("BENCH_METRICS_ALLOW", [], "comma-separated networks (CIDRs such as `10.0.0.0/8`, or "
                          "addresses) that read `/metrics` without a token")
    multiproc_dir: str = env("PROMETHEUS_MULTIPROC_DIR", "", "prometheus_client's own variable: an empty folder, the "
                             "same for the web and the web-queue workers of a host, where every process writes its "
                             "counters and a scrape adds them up; unset: one process's figures")

    @field_validator("multiproc_dir")
    @classmethod
    def _a_folder(cls, value: str) -> str:
        if value and not Path(value).is_dir():
            raise PydanticCustomError("env_rule", "is not a folder: create it (empty) before the web and its workers "
                                      "start (docs/operations.md \"Metrics\")")
        return value
