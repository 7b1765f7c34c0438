"""The web service: Django's own switches, the data folder, roles, rate limits, the demo model."""
import logging
from pathlib import Path

from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import CommaList, Flag, Group, Url, env

DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
LOCAL_HOSTS = ["localhost", "127.0.0.1", "[::1]", "testserver"]


class Web(Group):
    title = "Web"
    about = ("Django and the pages. Production is `DJANGO_DEBUG=0`: HTTPS only behind a TLS-terminating proxy "
             "that sets X-Forwarded-Proto, and `manage.py check --deploy` is clean. On a plain-HTTP test network: "
             "`DJANGO_SECURE_SSL_REDIRECT=0 DJANGO_SECURE_COOKIES=0 DJANGO_HSTS_SECONDS=0`.")

    debug: Flag = env("DJANGO_DEBUG", True, "Django's debug mode; 0 in production")
    secret_key: str = env("DJANGO_SECRET_KEY", DEV_SECRET_KEY, "Django's signing key; required with DJANGO_DEBUG=0",
                          shown="a development key", repr=False)
    allowed_hosts: CommaList = env("DJANGO_ALLOWED_HOSTS", LOCAL_HOSTS, "comma-separated host names the site answers",
                                   shown="`localhost,127.0.0.1,[::1],testserver`")
    csrf_trusted_origins: CommaList = env("DJANGO_CSRF_TRUSTED_ORIGINS", [],
                                          "comma-separated origins (`https://bench.example.org`) trusted for forms")
    behind_tls_proxy: Flag | None = env("DJANGO_BEHIND_TLS_PROXY", None,
                                        "trust X-Forwarded-Proto from the proxy; 0 when gunicorn faces the network",
                                        shown="on when DJANGO_DEBUG=0")
    secure_ssl_redirect: Flag | None = env("DJANGO_SECURE_SSL_REDIRECT", None, "redirect HTTP to HTTPS",
                                           shown="on when DJANGO_DEBUG=0")
    secure_cookies: Flag | None = env("DJANGO_SECURE_COOKIES", None, "session and CSRF cookies over HTTPS only",
                                      shown="on when DJANGO_DEBUG=0")
    hsts_seconds: int | None = env("DJANGO_HSTS_SECONDS", None, "the Strict-Transport-Security max-age",
                                   shown="31536000 when DJANGO_DEBUG=0, else 0", ge=0)
    hsts_include_subdomains: Flag = env("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True, "HSTS covers the subdomains")
    hsts_preload: Flag = env("DJANGO_HSTS_PRELOAD", False, "ask the browsers' preload lists: a promise only the "
                             "domain's owner can make")
    var_dir: Path | None = env("BENCH_VAR_DIR", None, "the web side's data folder: the defaults of the folders "
                               "below, static files, bisection mirrors, SQLite test databases", shown="`var`")
    log_level: str = env("BENCH_LOG_LEVEL", "INFO", "the Python log level of web and worker processes "
                         "(`DEBUG`, `INFO`, `WARNING`, `ERROR`)")
    public_url: Url = env("BENCH_PUBLIC_URL", "http://127.0.0.1:8000", "the dashboard's address as users reach it: "
                          "commit statuses, pull-request reports and alerts link to its pages")
    private_dashboard: Flag = env("BENCH_PRIVATE_DASHBOARD", False, "only logged-in users browse the dashboard")
    member_group: str = env("BENCH_MEMBER_GROUP", "", "members (who trigger and annotate) are this group's users; "
                            "empty: every logged-in user")
    api_requests_per_min: int = env("BENCH_API_REQUESTS_PER_MIN", 120, "JSON API requests a minute per token "
                                    "(per address without one)", ge=1)
    webhook_refused_per_min: int = env("BENCH_WEBHOOK_REFUSED_PER_MIN", 20, "unverified webhook deliveries a minute "
                                       "per source address (a valid signed delivery is never limited)", ge=1)
    cache_url: str = env("BENCH_CACHE_URL", "", "Redis for Django's cache (rate-limit counters, the home page's "
                         "summaries) shared by every web process; empty: each process its own", repr=False)
    tiny_model_dir: Path | None = env("BENCH_TINY_MODEL_DIR", None, "the demo benchmark's model "
                                      "(`python -m runners tiny-model`)", shown="`<BENCH_VAR_DIR>/tiny-model`")

    @field_validator("log_level")
    @classmethod
    def _a_level(cls, level: str) -> str:
        levels = logging.getLevelNamesMapping()
        if level not in levels:
            raise PydanticCustomError("env_rule", "is not a log level: {levels}",
                                      {"levels": ", ".join(sorted(levels, key=levels.get))})
        return level

    def by_mode(self, value, *, production, development):
        """VALUE where its variable is set, else the default of the mode DJANGO_DEBUG chose."""
        if value is not None:
            return value
        return development if self.debug else production

    @model_validator(mode="after")
    def _production_has_a_key(self) -> "Web":
        if not self.debug and self.secret_key.startswith("dev-only"):
            raise PydanticCustomError("env_rule", "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
        return self
