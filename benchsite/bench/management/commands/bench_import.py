"""`manage.py bench_import FILE`: load an offline GPU host's `runners ladder` result file, or an
export of another service's `/api/runs/` (its benchmark applied here first with bench_apply)."""
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.lifecycle import imports
from benchsite.bench.lifecycle.runs_export import is_runs_export, runs_export_import
from runners import contract


class Command(BaseCommand):
    help = "Import a `python -m runners ladder` result file, or an export of /api/runs/, as one batch of runs."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--pool", default="imported", help="GPU pool recorded for a new benchmark (ladder files)")
        parser.add_argument("--note", default="", help="exports: an annotation over the time the runs were measured (at most 200 characters)")

    def handle(self, *args, file, pool, note, **options):
        if len(note) > 200:
            raise CommandError(f"--note is {len(note)} characters; at most 200")
        try:
            data = json.loads(file.read_text())
            if is_runs_export(data):
                runs = runs_export_import(data=data, note=note)
            else:
                runs = imports.runs_import(data=data, gpu_pool=pool)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"cannot import {file}: {exc}") from exc
        for run in runs:
            run.refresh_from_db()
            decode = run.measurements.filter(metric=contract.DECODE_TOK_S).first()
            figure = f"{decode.value:.1f} tok/s" if decode else run.error.splitlines()[0][:80] if run.error else ""
            self.stdout.write(f"run {run.id} {run.variant.name}: {run.state} {figure}")
        self.stdout.write(self.style.SUCCESS(f"imported {len(runs)} runs into {runs[0].benchmark.slug}" if runs else "no runs"))
