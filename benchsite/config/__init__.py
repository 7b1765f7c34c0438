"""The service's configuration, typed and grouped by subsystem, read from the environment once.

`load()` reads and checks every variable at start (benchsite/settings.py calls it, so every
process, manage.py command, gunicorn and Celery worker alike, refuses a bad value before it
serves anything, naming the variable); settings.py then fills Django's setting names from the
groups. The GPU side's variables are runners/config.py's. docs/configuration.md is generated from
both (`python -m benchsite.config.reference`).
"""
from .load import GROUPS, Config, ConfigError, load
from .retry import RetryPolicy

__all__ = ["GROUPS", "Config", "ConfigError", "RetryPolicy", "load"]
