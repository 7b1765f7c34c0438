"""`manage.py bench_apply FILE.yaml [--dry-run]`: benchmarks, ladders, watches and alert subscriptions as code."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.definitions.apply import ApplyError, config_apply, config_load


class Command(BaseCommand):
    help = ("Create or update the benchmarks, variants, repository watches and alert subscriptions a YAML file "
            "describes (idempotent).")

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")

    def handle(self, *args, file: Path, dry_run: bool, **options):
        try:
            outcome = config_apply(data=config_load(file.read_text()), dry_run=dry_run)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        except ApplyError as exc:
            raise CommandError(f"{file}: {exc}") from None
        prefix = "would " if dry_run else ""
        for change in outcome.changes:
            self.stdout.write(prefix + change)
        for note in outcome.notes:
            self.stderr.write(f"note: {note}")
        if not outcome.changes:
            self.stdout.write("no changes")
        elif dry_run:
            self.stdout.write(self.style.WARNING(f"dry run: {len(outcome.changes)} change(s), nothing written"))
        else:
            self.stdout.write(self.style.SUCCESS(f"{len(outcome.changes)} change(s) applied"))
