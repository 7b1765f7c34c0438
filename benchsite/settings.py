"""Django's settings: the names the code reads (settings.BENCH_X) and the shapes Django wants,
filled from the typed configuration (benchsite/config/; every variable in docs/configuration.md).

Every variable is read and checked once, here at import: a bad value stops every process
(manage.py, gunicorn, Celery) at start with a message naming the variable. Defaults need no
server: SQLite and Celery's filesystem transport, so `make run` works on a bare machine. Set
DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis) in production.
"""
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .config import ConfigError, load
from .storage_config import filesystem_artifacts_storage, s3_artifacts_storage

BASE_DIR = Path(__file__).resolve().parent.parent
try:
    _config = load(BASE_DIR)
except ConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None
_web, _storage, _workers, _shared = _config.web, _config.storage, _config.workers, _config.shared
VAR_DIR = _config.var_dir  # created by BenchConfig.ready()

DEBUG = _web.debug
SECRET_KEY = _web.secret_key
ALLOWED_HOSTS = _web.allowed_hosts
CSRF_TRUSTED_ORIGINS = _web.csrf_trusted_origins

# --- Production (DJANGO_DEBUG=0): HTTPS only; `manage.py check --deploy` is clean -----------
# Each switch left unset follows DEBUG: on in production, off in development.
if _web.by_mode(_web.behind_tls_proxy, production=True, development=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = _web.by_mode(_web.secure_ssl_redirect, production=True, development=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _web.by_mode(_web.secure_cookies, production=True, development=False)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_HSTS_SECONDS = _web.by_mode(_web.hsts_seconds, production=365 * 24 * 3600, development=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _web.hsts_include_subdomains
SECURE_HSTS_PRELOAD = _web.hsts_preload
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
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files as static files: /api/docs loads nothing from elsewhere
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
    "benchsite.bench.domain.permissions.PrivateDashboardMiddleware",  # BENCH_PRIVATE_DASHBOARD
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

_database_url = _config.database.url or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
# Health checks: a connection broken while idle (database restarted) is replaced before use.
DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
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
    DATABASES["default"]["OPTIONS"] = {"timeout": _config.database.sqlite_busy_timeout_s,
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
BENCH_ARTIFACTS_BACKEND = _storage.backend
BENCH_ARTIFACTS_DIR = _config.artifacts_dir
BENCH_ARTIFACT_MAX_BYTES = _storage.max_bytes
if BENCH_ARTIFACTS_BACKEND == "s3":
    _artifacts_storage = s3_artifacts_storage(
        bucket=_storage.s3_bucket, endpoint_url=_storage.s3_endpoint_url, region=_storage.s3_region,
        access_key=_storage.s3_access_key_id, secret_key=_storage.s3_secret_access_key, prefix=_storage.s3_prefix)
else:
    _artifacts_storage = filesystem_artifacts_storage(BENCH_ARTIFACTS_DIR)
BENCH_RETAIN_TRACES_DAYS = _config.retention.traces_days
BENCH_RETAIN_LOGS_DAYS = _config.retention.logs_days
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": _artifacts_storage,
}

LOGIN_URL = "/accounts/login/"
# Roles (benchsite/bench/domain/permissions.py): anonymous visitors browse unless the dashboard is
# private; members trigger and annotate.
BENCH_PRIVATE_DASHBOARD = _web.private_dashboard
BENCH_MEMBER_GROUP = _web.member_group
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

# --- Celery ----------------------------------------------------------------------------
# Embedded default: the filesystem transport (no server). Production: redis://host:6379/0.
_celery_dir = VAR_DIR / "celery"
CELERY_BROKER_URL = _config.broker.url
CELERY_RESULT_BACKEND = _config.broker.result_backend
if CELERY_RESULT_BACKEND is None:
    CELERY_RESULT_BACKEND = CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else f"file://{_celery_dir / 'results'}"
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
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": _config.broker.visibility_timeout_s}

# Web-side queue: stores results, reaps stale runs. One queue per GPU pool: gpu.<pool>.
BENCH_WEB_QUEUE = "web"
# The life cycle between the web side and the GPU workers (benchsite/config/workers.py).
BENCH_HEARTBEAT_INTERVAL_S = _workers.heartbeat_interval_s
BENCH_HEARTBEAT_TIMEOUT_S = _workers.heartbeat_timeout_s
BENCH_LOG_INTERVAL_S = _workers.log_interval_s
BENCH_WORKER_SEEN_TIMEOUT_S = _workers.worker_seen_timeout_s
BENCH_REAPER_INTERVAL_S = _workers.reaper_interval_s
BENCH_REAPER_REQUEUE = _workers.reaper_requeue
BENCH_REQUEUE_LOST_AFTER_S = _workers.requeue_lost_after_s
BENCH_CLAIM_TIMEOUT_S = _workers.claim_timeout_s
BENCH_RESULT_SEND_TIMEOUT_S = _workers.result_send_timeout_s
BENCH_ORPHAN_GRACE_S = _workers.orphan_grace_s
# Web-queue messages that meet an unreachable database are retried by this policy (lifecycle/tasks.py,
# at import); the name below only mirrors its cap.
BENCH_DB_RETRY = _config.database.retry
BENCH_DB_RETRY_BACKOFF_MAX_S = _config.database.retry_backoff_max_s
# The runners' variables that the web side reads too (runners/config.py reads them).
BENCH_WORK_DIR = _shared.work_dir
BENCH_PROBE_MODULES = _shared.probe_modules
BENCH_ALLOW_FILE_REPOS = _shared.allow_file_repos
BENCH_TINY_MODEL_DIR = _config.tiny_model_dir

# --- Regression verdicts, confirmations, alerts and host health (benchsite.regressions) -----
_regressions, _alerts = _config.regressions, _config.alerts
BENCH_VERDICT_MIN_HISTORY = _regressions.verdict_min_history
BENCH_VERDICT_MAX_HISTORY = _regressions.verdict_max_history
BENCH_CONFIRM_REGRESSIONS = _regressions.confirm_regressions
BENCH_CONFIRM_HOST_SEEN_H = _regressions.confirm_host_seen_h
BENCH_CONFIRM_MAX_RUNS = _regressions.confirm_max_runs
BENCH_COMM_HEALTH_DRIFT = _regressions.comm_health_drift
BENCH_COMM_HEALTH_HISTORY = _regressions.comm_health_history
BENCH_ALERT_SECRET = _alerts.secret
BENCH_ALERT_FROM_EMAIL = _alerts.from_email
BENCH_ALERT_TIMEOUT_S = _alerts.timeout_s
# The alerts' retry policy, which regressions/tasks.py reads; the two names below only mirror it.
BENCH_ALERT_RETRY = _alerts.retry
BENCH_ALERT_MAX_RETRIES = _alerts.max_retries
BENCH_ALERT_RETRY_BASE_MS = _alerts.retry_base_ms

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": _web.log_level},
    "loggers": {"httpx": {"level": "WARNING"}},  # one line per health poll otherwise
}

# --- Webhooks, the JSON API and commit statuses (benchsite.integrations) ------------------------
_github, _statuses = _config.github, _config.statuses
BENCH_PUBLIC_URL = _web.public_url
BENCH_GITHUB_API_URL = _github.api_url
BENCH_GITHUB_HOSTS = _github.hosts
BENCH_GITHUB_TOKEN = _github.token
BENCH_GITHUB_APP_ID = _github.app_id
BENCH_GITHUB_APP_PRIVATE_KEY = _github.app_private_key
BENCH_GITHUB_APP_WEBHOOK_SECRET = _github.app_webhook_secret
BENCH_GITLAB_TOKEN = _config.gitlab.token
BENCH_GITLAB_API_URL = _config.gitlab.api_url
BENCH_STATUS_CONTEXT = _statuses.context
BENCH_STATUS_TIMEOUT_S = _statuses.timeout_s
# The forges' retry policy, which the integrations' tasks read; the two names below only mirror it.
BENCH_STATUS_RETRY = _statuses.retry
BENCH_STATUS_MAX_RETRIES = _statuses.max_retries
BENCH_STATUS_RETRY_BASE_MS = _statuses.retry_base_ms
# Rate limits (benchsite/integrations/ratelimit.py, counters in CACHES).
BENCH_API_REQUESTS_PER_MIN = _web.api_requests_per_min
BENCH_WEBHOOK_REFUSED_PER_MIN = _web.webhook_refused_per_min
CACHES = {"default": ({"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _web.cache_url}
                      if _web.cache_url else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"})}

# The JSON API (benchsite/rest/): Django REST framework answering as the hand-written views did,
# and its OpenAPI document generated by drf-spectacular (/api/openapi.json, Swagger UI at /api/docs).
REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["benchsite.rest.answers.JsonRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],  # the document's; views read their bodies
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "benchsite.rest.answers.FirstRenderer",
    "DEFAULT_AUTHENTICATION_CLASSES": [],  # the API's views name theirs (integrations/api_access.py)
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_THROTTLE_CLASSES": [],
    "DEFAULT_METADATA_CLASS": None,  # OPTIONS is refused (405), as before
    "URL_FORMAT_OVERRIDE": None,  # ?format= is a query parameter like any other
    "EXCEPTION_HANDLER": "benchsite.rest.answers.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "decode-bench runs API",
    "DESCRIPTION": "Runs, commits and pull requests, and triggering runs (docs/api.md).",
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",  # JSON Schema: a nullable field's type is [type, "null"], as jsonschema reads it
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/",
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    "POSTPROCESSING_HOOKS": ["benchsite.rest.answers.finish_document"],  # enums inline; request bodies closed
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Prometheus metrics (benchsite.metrics, docs/operations.md "Metrics") --------------------
BENCH_METRICS_TOKEN = _config.metrics.token
BENCH_METRICS_ALLOW = _config.metrics.allow
# prometheus_client reads the variable itself when a process starts; checked above.
PROMETHEUS_MULTIPROC_DIR = _config.metrics.multiproc_dir
# Prometheus may scrape gunicorn directly inside the network, over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
