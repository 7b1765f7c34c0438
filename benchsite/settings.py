"""One settings module, driven by environment variables with embedded defaults.

Defaults need no server: SQLite and Celery's filesystem transport, so `make run` works on a
bare machine. Set DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis) in production.
"""
import os
from pathlib import Path

import dj_database_url

from .env import env_bool, env_choice, env_fraction, env_int, env_list, env_networks, env_required, env_str
from .storage_config import filesystem_artifacts_storage, s3_artifacts_storage

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("BENCH_VAR_DIR", str(BASE_DIR / "var")))  # created by BenchConfig.ready()

DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
if not DEBUG and SECRET_KEY.startswith("dev-only"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# --- Production (DJANGO_DEBUG=0): HTTPS only; `manage.py check --deploy` is clean -----------
# The site is served behind a TLS-terminating proxy that sets X-Forwarded-Proto (set
# DJANGO_BEHIND_TLS_PROXY=0 when gunicorn itself faces the network). On a plain-HTTP test
# network, DJANGO_SECURE_SSL_REDIRECT=0 DJANGO_SECURE_COOKIES=0 DJANGO_HSTS_SECONDS=0.
if env_bool("DJANGO_BEHIND_TLS_PROXY", not DEBUG):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0 if DEBUG else 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
# Preloading is a promise to the browsers' lists that only the domain's owner can make.
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "benchsite.bench",
    "benchsite.integrations",
    "benchsite.regressions",
    "benchsite.metrics",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # serves Chart.js and our JS under gunicorn
    # compresses what the views below return (WhiteNoise serves its own precompressed files)
    "benchsite.compression.PageGZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "benchsite.bench.pages.permissions.PrivateDashboardMiddleware",  # BENCH_PRIVATE_DASHBOARD
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "benchsite.urls"
WSGI_APPLICATION = "benchsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env_str("DATABASE_URL", "") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
try:
    # Health checks: a connection broken while idle (database restarted) is replaced before use.
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
except ValueError as exc:  # unknown scheme, malformed URL
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r} is not a database URL: {exc}") from None
if "postgresql" in DATABASES["default"]["ENGINE"]:
    # No JIT compilation: the pages' queries run in milliseconds, and the planner's cost estimate
    # of a correlated subquery over 1,000,000 runs switched it on, adding 30 ms to a 45 ms query.
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = f"{_options.get('options', '')} -c jit=off".strip()
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The web process and the web-queue workers write concurrently: wait instead of failing.
    # WAL lets readers go on while one writes; IMMEDIATE takes the write lock when a transaction
    # begins, so a reader never has to upgrade to a writer (SQLite answers that "database is
    # locked" at once, busy timeout or not); the busy timeout (s) is how long a writer waits.
    DATABASES["default"]["OPTIONS"] = {"timeout": env_int("BENCH_SQLITE_BUSY_TIMEOUT_S", 30, minimum=1),
                                       "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory, so that worker processes started by the tests see the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# --- Artifacts (server and build logs, profiler traces, probe JSON): a storage of their own ---
# "filesystem" (default: BENCH_ARTIFACTS_DIR, shared by the web and a GPU worker on one host) or
# "s3" (any S3-compatible object store, MinIO in docker-compose.yml, through django-storages).
# GPU workers write with the same storage: give them the same settings (README "Artifacts").
BENCH_ARTIFACTS_BACKEND = env_choice("BENCH_ARTIFACTS_BACKEND", "filesystem", ("filesystem", "s3"))
BENCH_ARTIFACTS_DIR = Path(env_str("BENCH_ARTIFACTS_DIR", str(VAR_DIR / "artifacts")))
# One artifact larger than this is refused (streamed, so it is a disk or bucket bound, not memory).
BENCH_ARTIFACT_MAX_BYTES = env_int("BENCH_ARTIFACT_MAX_BYTES", 2 * 1024**3, minimum=1)
if BENCH_ARTIFACTS_BACKEND == "s3":
    _artifacts_storage = s3_artifacts_storage(
        bucket=env_required("BENCH_ARTIFACTS_S3_BUCKET", "BENCH_ARTIFACTS_BACKEND=s3"),
        endpoint_url=env_str("BENCH_ARTIFACTS_S3_ENDPOINT_URL", ""),  # MinIO: http://minio:9000
        region=env_str("BENCH_ARTIFACTS_S3_REGION", ""),
        access_key=env_str("BENCH_ARTIFACTS_S3_ACCESS_KEY_ID", ""),  # empty: boto3's own chain
        secret_key=env_str("BENCH_ARTIFACTS_S3_SECRET_ACCESS_KEY", ""),
        prefix=env_str("BENCH_ARTIFACTS_S3_PREFIX", ""),
    )
else:
    _artifacts_storage = filesystem_artifacts_storage(BENCH_ARTIFACTS_DIR)
# Retention (benchsite/bench/retention/, `manage.py bench_gc`): profiler traces and server and
# build logs are freed after this many days; 0 keeps them forever. Runs that matter (references,
# change points, confirmed regressions, open pull requests, annotated) and measurements are kept.
BENCH_RETAIN_TRACES_DAYS = env_int("BENCH_RETAIN_TRACES_DAYS", 30, minimum=0)
BENCH_RETAIN_LOGS_DAYS = env_int("BENCH_RETAIN_LOGS_DAYS", 90, minimum=0)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": _artifacts_storage,
}

LOGIN_URL = "/accounts/login/"
# Roles (benchsite/bench/pages/permissions.py): anonymous visitors browse unless the dashboard is
# private; members trigger and annotate (every logged-in user, or only this group's members).
BENCH_PRIVATE_DASHBOARD = env_bool("BENCH_PRIVATE_DASHBOARD", False)
BENCH_MEMBER_GROUP = env_str("BENCH_MEMBER_GROUP", "")
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# --- Celery ----------------------------------------------------------------------------
# Embedded default: the filesystem transport (no server). Production: redis://host:6379/0.
_celery_dir = VAR_DIR / "celery"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_RESULT_BACKEND = env_str(
    "CELERY_RESULT_BACKEND",
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else f"file://{_celery_dir / 'results'}",
)
if CELERY_BROKER_URL == "filesystem://":
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_celery_dir / "in"),
        "data_folder_out": str(_celery_dir / "in"),
        "processed_folder": str(_celery_dir / "processed"),
        "control_folder": str(_celery_dir / "control"),
        "store_processed": False,
    }
else:
    # Longer than the longest run, or Redis redelivers a long run to a second worker.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("BENCH_VISIBILITY_TIMEOUT_S", 6 * 3600)}

# Web-side queue: stores results, reaps stale runs. One queue per GPU pool: gpu.<pool>.
BENCH_WEB_QUEUE = "web"
# The GPU worker sends a heartbeat this often; a run whose heartbeat is older than the timeout
# is failed by the reaper (or re-queued once, with BENCH_REAPER_REQUEUE=1).
BENCH_HEARTBEAT_INTERVAL_S = env_int("BENCH_HEARTBEAT_INTERVAL_S", 20, minimum=1)
BENCH_HEARTBEAT_TIMEOUT_S = env_int("BENCH_HEARTBEAT_TIMEOUT_S", 300, minimum=2)
if BENCH_HEARTBEAT_TIMEOUT_S < 2 * BENCH_HEARTBEAT_INTERVAL_S:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"BENCH_HEARTBEAT_TIMEOUT_S={BENCH_HEARTBEAT_TIMEOUT_S} must be at least twice "
                               f"BENCH_HEARTBEAT_INTERVAL_S={BENCH_HEARTBEAT_INTERVAL_S}, or a slow beat reaps a live run")
# While a run builds and runs, the GPU worker sends the tail of its build and engine logs this
# often (when it grew; the last 64 KB); the run page shows it live.
BENCH_LOG_INTERVAL_S = env_int("BENCH_LOG_INTERVAL_S", 3, minimum=1)
# A pool whose workers (their own heartbeat, every BENCH_HEARTBEAT_INTERVAL_S) were all silent
# this long is not served: a trigger on it needs a confirmation (the API's "force": true).
BENCH_WORKER_SEEN_TIMEOUT_S = env_int("BENCH_WORKER_SEEN_TIMEOUT_S", 90, minimum=1)
BENCH_REAPER_INTERVAL_S = env_int("BENCH_REAPER_INTERVAL_S", 60, minimum=1)
BENCH_REAPER_REQUEUE = env_bool("BENCH_REAPER_REQUEUE", False)
# A QUEUED run older than this whose message is in no queue (a broker restarted without its
# data) is sent again by the reaper; the claim is conditional, so a duplicate is harmless.
BENCH_REQUEUE_LOST_AFTER_S = env_int("BENCH_REQUEUE_LOST_AFTER_S", 600, minimum=1)
# A GPU worker waits this long for its claim's answer, then retries the run after half of it.
BENCH_CLAIM_TIMEOUT_S = env_int("BENCH_CLAIM_TIMEOUT_S", 60, minimum=1)
# Web-queue messages that meet an unreachable database are retried, the wait doubling up to this.
BENCH_DB_RETRY_BACKOFF_MAX_S = env_int("BENCH_DB_RETRY_BACKOFF_MAX_S", 30, minimum=1)
# How long the GPU worker keeps retrying a result while the broker is unreachable.
BENCH_RESULT_SEND_TIMEOUT_S = env_int("BENCH_RESULT_SEND_TIMEOUT_S", 3600, minimum=1)
# Between SIGTERM and SIGKILL for an engine left behind by a killed worker (stopped at its next start).
BENCH_ORPHAN_GRACE_S = env_int("BENCH_ORPHAN_GRACE_S", 10, minimum=0)
# Where the GPU worker keeps engine logs and probe files before sending them back.
BENCH_WORK_DIR = Path(env_str("BENCH_WORK_DIR", str(VAR_DIR / "work")))
# Extra probe modules (comma-separated import paths), loaded by the web side and the GPU workers
# alike: their probes run in every job they apply to, their metrics join contract.METRICS.
BENCH_PROBE_MODULES = env_list("BENCH_PROBE_MODULES", [])
# The demo benchmark's model: generated locally by `python -m runners tiny-model`.
BENCH_TINY_MODEL_DIR = Path(env_str("BENCH_TINY_MODEL_DIR", str(VAR_DIR / "tiny-model")))
# file:// engine repositories (tests): the web side's bisection mirrors, as on GPU workers.
BENCH_ALLOW_FILE_REPOS = env_bool("BENCH_ALLOW_FILE_REPOS", False)

# --- Regression verdicts, confirmations, alerts and host health (benchsite.regressions) -----
# Baseline runs a verdict needs before it says more than "not enough data", and the most it uses.
BENCH_VERDICT_MIN_HISTORY = env_int("BENCH_VERDICT_MIN_HISTORY", 3, minimum=2)
BENCH_VERDICT_MAX_HISTORY = env_int("BENCH_VERDICT_MAX_HISTORY", 20, minimum=2)
# Re-run a regression's commit once and alert only when the re-run agrees.
BENCH_CONFIRM_REGRESSIONS = env_bool("BENCH_CONFIRM_REGRESSIONS", True)
# A host of the pool is a place for a confirmation re-run when it finished a run this many hours ago.
BENCH_CONFIRM_HOST_SEEN_H = env_int("BENCH_CONFIRM_HOST_SEEN_H", 24, minimum=1)
# HMAC-SHA256 key of the outgoing alert webhook (X-Bench-Signature: sha256=HEX) when a
# subscription has none of its own.
BENCH_ALERT_SECRET = env_str("BENCH_ALERT_SECRET", "")
BENCH_ALERT_MAX_RETRIES = env_int("BENCH_ALERT_MAX_RETRIES", 5)
# Backoff: base, then twice as long before each further retry.
BENCH_ALERT_RETRY_BASE_MS = env_int("BENCH_ALERT_RETRY_BASE_MS", 30_000, minimum=1)
BENCH_ALERT_TIMEOUT_S = env_int("BENCH_ALERT_TIMEOUT_S", 10, minimum=1)
# The sender of alert emails; empty: Django's DEFAULT_FROM_EMAIL.
BENCH_ALERT_FROM_EMAIL = env_str("BENCH_ALERT_FROM_EMAIL", "")
# A host whose allreduce latency moved more than this (0.25 = 25%) from the median of its own
# latest BENCH_COMM_HEALTH_HISTORY checks (3 needed) is flagged.
BENCH_COMM_HEALTH_DRIFT = env_fraction("BENCH_COMM_HEALTH_DRIFT", 0.25)
BENCH_COMM_HEALTH_HISTORY = env_int("BENCH_COMM_HEALTH_HISTORY", 10, minimum=3)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("BENCH_LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}},  # one line per health poll otherwise
}

# --- Webhooks, the JSON API and commit statuses (benchsite.integrations) ------------------------
# The dashboard's address as users reach it: commit statuses link to run pages there.
BENCH_PUBLIC_URL = env_str("BENCH_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# GitHub's REST API; https://HOST/api/v3 for GitHub Enterprise Server.
BENCH_GITHUB_API_URL = env_str("BENCH_GITHUB_API_URL", "https://api.github.com").rstrip("/")
# Repositories on these hosts get commit statuses through that API.
BENCH_GITHUB_HOSTS = env_list("BENCH_GITHUB_HOSTS", ["github.com"])
# A token allowed to write commit statuses; empty: no statuses are reported.
BENCH_GITHUB_TOKEN = env_str("BENCH_GITHUB_TOKEN", "")
BENCH_STATUS_CONTEXT = env_str("BENCH_STATUS_CONTEXT", "decode-bench")
# Pull-request checks as a GitHub App (check runs need one): its id and private key (PEM text, or
# @path to a file), and the secret of the App's own webhook (check_run deliveries). Without an App,
# BENCH_GITHUB_TOKEN gives a commit status on the PR's head plus one PR comment.
BENCH_GITHUB_APP_ID = env_str("BENCH_GITHUB_APP_ID", "")
BENCH_GITHUB_APP_PRIVATE_KEY = env_str("BENCH_GITHUB_APP_PRIVATE_KEY", "")
BENCH_GITHUB_APP_WEBHOOK_SECRET = env_str("BENCH_GITHUB_APP_WEBHOOK_SECRET", "")
# GitLab merge requests: a commit status and one note, with this token, at this API.
BENCH_GITLAB_TOKEN = env_str("BENCH_GITLAB_TOKEN", "")
BENCH_GITLAB_API_URL = env_str("BENCH_GITLAB_API_URL", "https://gitlab.com/api/v4").rstrip("/")
BENCH_STATUS_MAX_RETRIES = env_int("BENCH_STATUS_MAX_RETRIES", 5)
# Backoff: base, then twice as long before each further retry (30 s, 60 s, 120 s...).
BENCH_STATUS_RETRY_BASE_MS = env_int("BENCH_STATUS_RETRY_BASE_MS", 30_000, minimum=1)
BENCH_STATUS_TIMEOUT_S = env_int("BENCH_STATUS_TIMEOUT_S", 10, minimum=1)
# Rate limits (benchsite/integrations/ratelimit.py, counters in CACHES): JSON API requests per token
# (per address without one), and unverified webhook deliveries per source address. A valid
# signed delivery is never limited.
BENCH_API_REQUESTS_PER_MIN = env_int("BENCH_API_REQUESTS_PER_MIN", 120, minimum=1)
BENCH_WEBHOOK_REFUSED_PER_MIN = env_int("BENCH_WEBHOOK_REFUSED_PER_MIN", 20, minimum=1)
# Counters shared by every web process: Redis when BENCH_CACHE_URL is set, else per process.
_cache_url = env_str("BENCH_CACHE_URL", "")
CACHES = {"default": ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
                      if _cache_url else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"})}

# --- Prometheus metrics (benchsite.metrics, docs/operations.md "Metrics") --------------------
# GET /metrics answers a bearer token or an address in these networks; with neither set, 404.
BENCH_METRICS_TOKEN = env_str("BENCH_METRICS_TOKEN", "")
BENCH_METRICS_ALLOW = env_networks("BENCH_METRICS_ALLOW")
# prometheus_client's own variable, read by it when a process starts: each process writes its
# counters there and a scrape adds up the folder's files (benchsite/metrics/exposition.py).
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR and not Path(PROMETHEUS_MULTIPROC_DIR).is_dir():
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"PROMETHEUS_MULTIPROC_DIR={PROMETHEUS_MULTIPROC_DIR!r} is not a folder: create it "
                               "(empty) before the web and its workers start (docs/operations.md \"Metrics\")")
# Prometheus may scrape gunicorn directly inside the network, over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
