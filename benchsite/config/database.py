"""The database: PostgreSQL in production, SQLite by default; how web-queue tasks wait for it."""
import dj_database_url
from pydantic import field_validator
from pydantic_core import PydanticCustomError

from .fields import Group, env
from .retry import RetryPolicy

# Web-queue messages that meet an unreachable database (restart, failover) retry for hours.
DB_RETRIES = 500
DB_RETRY_BASE_S = 1


class Database(Group):
    title = "Database"
    about = ("PostgreSQL in production; SQLite by default. While the database is away, web-queue messages wait "
             "in the broker and are retried by the database's policy.")

    url: str = env("DATABASE_URL", "", "e.g. `postgres://user:pw@host:5432/bench`", shown="`sqlite:///db.sqlite3`", repr=False)
    sqlite_busy_timeout_s: int = env("BENCH_SQLITE_BUSY_TIMEOUT_S", 30, "SQLite only (WAL, IMMEDIATE transactions): "
                                     "how long a writer waits for another's lock", ge=1)
    retry_backoff_max_s: int = env("BENCH_DB_RETRY_BACKOFF_MAX_S", 30, "the database retry policy's longest wait "
                                   "between retries of a web-queue message", ge=1)

    @field_validator("url")
    @classmethod
    def _parses(cls, url: str) -> str:
        if url:
            try:
                dj_database_url.parse(url)
            except ValueError as exc:  # unknown scheme, malformed URL
                raise PydanticCustomError("env_rule", "is not a database URL: {why}", {"why": str(exc)}) from None
        return url

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=DB_RETRIES, base_s=DB_RETRY_BASE_S, cap_s=self.retry_backoff_max_s)
