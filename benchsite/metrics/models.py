"""Runs counted by benchmark, state and trigger, kept by database triggers on bench_run."""
from django.db import models


class RunCount(models.Model):
    """How many runs of a benchmark are in a state, by trigger. Database triggers on bench_run
    (migration 0001) keep it exact on every insert, delete and change of state, trigger or
    benchmark, whatever wrote it: a save, QuerySet.update, bulk_create, a cascade, raw SQL. A
    scrape reads these few rows instead of counting a million runs. The pool is the benchmark's
    at scrape time (joined then), so moving a benchmark to another pool moves its counts too."""

    benchmark_id = models.BigIntegerField()  # no foreign key: rows of a deleted benchmark are 0 and skipped
    state = models.CharField(max_length=10)
    trigger = models.CharField(max_length=10)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["benchmark_id", "state", "trigger"], name="run_count_key")]

    def __str__(self):
        return f"benchmark {self.benchmark_id} {self.state} {self.trigger}: {self.n}"
