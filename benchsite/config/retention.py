"""What `manage.py bench_gc` frees (benchsite/bench/retention/, docs/operations.md "Retention")."""
from .fields import Group, env


class Retention(Group):
    title = "Retention"
    about = ("Runs that matter (references, change points, confirmed regressions, open pull requests, annotated), "
             "probe outputs and measurements are kept forever.")

    traces_days: int = env("BENCH_RETAIN_TRACES_DAYS", 30, "profiler traces are freed after this many days; "
                           "0 keeps them forever", ge=0)
    logs_days: int = env("BENCH_RETAIN_LOGS_DAYS", 90, "server and build logs likewise", ge=0)
