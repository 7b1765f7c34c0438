"""A PostgreSQL database of a benchmark's own on a shared server, created and dropped around it
(the shared database `test` is left alone)."""
import contextlib
import os


@contextlib.contextmanager
def private_database(server: str, prefix: str):
    """Yield the URL of a new database PREFIX_<pid> on SERVER (postgres://user@host:port); drop it
    after, closing this process's Django connections first."""
    import psycopg

    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with contextlib.suppress(Exception):  # Django may not be set up yet
            from django.db import connections

            connections.close_all()
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
