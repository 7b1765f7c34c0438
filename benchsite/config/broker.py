"""The Celery broker: the filesystem transport by default (no server), Redis in production."""
from .fields import Group, env


class Broker(Group):
    title = "Broker"
    about = "GPU workers need only the broker's URL; the web side and its workers need the database too."

    url: str = env("CELERY_BROKER_URL", "filesystem://", "e.g. `redis://host:6379/0`",
                   shown="`filesystem://` (under `<BENCH_VAR_DIR>/celery`)", repr=False)
    result_backend: str | None = env("CELERY_RESULT_BACKEND", None, "where claims are answered",
                                     shown="the broker if Redis, else `file://<BENCH_VAR_DIR>/celery/results`", repr=False)
    visibility_timeout_s: int = env("BENCH_VISIBILITY_TIMEOUT_S", 6 * 3600, "Redis redelivers an unacknowledged "
                                    "message after this long: longer than the longest run", ge=0)
