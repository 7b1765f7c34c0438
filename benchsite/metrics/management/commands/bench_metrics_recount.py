"""Fill metrics_runcount again from the runs (one pass over bench_run)."""
from django.core.management.base import BaseCommand
from django.db import connection, transaction

from benchsite.metrics.run_count_sql import RECOUNT


class Command(BaseCommand):
    help = "Count the runs by benchmark, state and trigger again (the table /metrics reads; triggers keep it)."

    def handle(self, *args, **options):
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # writes wait until the new counts commit: none is counted twice or missed
                cursor.execute("LOCK TABLE bench_run IN SHARE MODE")
            for sql in RECOUNT:
                cursor.execute(sql)
            cursor.execute("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM metrics_runcount")
            rows, runs = cursor.fetchone()
        self.stdout.write(f"{runs} runs counted in {rows} rows (benchmark, state, trigger)")
