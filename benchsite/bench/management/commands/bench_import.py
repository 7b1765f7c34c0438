"""`manage.py bench_import FILE`: load an offline GPU host's `runners ladder` result file."""
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.bench import services
from runners import contract


class Command(BaseCommand):
    help = "Import a `python -m runners ladder` result file as one batch of runs."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--pool", default="imported", help="GPU pool recorded for a new benchmark")

    def handle(self, *args, file, pool, **options):
        try:
            data = json.loads(file.read_text())
            runs = services.runs_import(data=data, gpu_pool=pool)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot import {file}: {exc}") from exc
        for run in runs:
            run.refresh_from_db()
            decode = run.measurements.filter(metric=contract.DECODE_TOK_S).first()
            figure = f"{decode.value:.1f} tok/s" if decode else run.error.splitlines()[0][:80] if run.error else ""
            self.stdout.write(f"run {run.id} {run.variant.name}: {run.state} {figure}")
        self.stdout.write(self.style.SUCCESS(f"imported {len(runs)} runs into {runs[0].benchmark.slug}" if runs else "no runs"))
