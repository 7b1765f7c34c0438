"""Free the artifact files the retention policy allows (BENCH_RETAIN_TRACES_DAYS,
BENCH_RETAIN_LOGS_DAYS), or with --dry-run only show them; says what it keeps and why."""
from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import filesizeformat

from benchsite.bench.retention.collect import collect
from benchsite.bench.retention.policy import RULES, Policy
from benchsite.bench.retention.protected import RuleMissing
from benchsite.bench.retention.specs import specs_collect
from benchsite.bench.storage.artifacts import describe_storage


class Command(BaseCommand):
    help = ("Free profiler traces and logs older than the retention policy allows, keeping those of "
            "protected runs; runs, measurements and artifact rows always stay. Kept job specs no run "
            "points at any more go too.")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="show what would be freed and kept; change nothing")

    def handle(self, *args, dry_run=False, **options):
        policy = Policy.from_settings()
        self.stdout.write(f"retention policy ({describe_storage()}):")
        for line in policy.lines():
            self.stdout.write(f"  {line}")
        try:
            report = collect(policy=policy, dry_run=dry_run)
        except RuleMissing as exc:
            raise CommandError(str(exc)) from None
        verb = "would free" if dry_run else "freed"
        for kind, count in sorted(report.freed.items()):
            self.stdout.write(f"{verb} {count} {kind} file(s), {filesizeformat(report.freed_bytes[kind])}")
        if not report.freed:
            self.stdout.write(f"{verb} nothing: no unprotected file is past its days")
        for rule, why in RULES:
            if report.kept[rule]:
                self.stdout.write(f"kept {report.kept[rule]} file(s), {filesizeformat(report.kept_bytes[rule])}, "
                                  f"past their days ({rule}): {why}")
        specs = specs_collect(dry_run=dry_run)
        self.stdout.write(f"{'would delete' if dry_run else 'deleted'} {specs} kept job spec(s) no run points at")
        if report.failed:
            for failure in report.failed[:20]:
                self.stderr.write(f"not freed: {failure}")
            raise CommandError(f"{len(report.failed)} file(s) could not be deleted from {describe_storage()}; "
                               "their rows are unchanged and the next bench_gc tries again")
