"""`manage.py bench_rollup [--benchmark SLUG] [--rebuild]`: bring the charts' rolled-up series up to
date (after a bulk import or a restore, which send no signals), or rebuild them from the raw tables;
either way the home page's cached summaries of those benchmarks are given a new version, so that
every web process recomputes them (bench.domain.home_cache)."""
from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.models import Benchmark
from benchsite.bench.domain import home_cache
from benchsite.bench.domain import rollups


class Command(BaseCommand):
    help = ("Rebuild the charts' stale rolled-up series (every one with --rebuild), of one benchmark or all, "
            "and make the home page recompute their summaries.")

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", metavar="SLUG", help="only this benchmark's series")
        parser.add_argument("--rebuild", action="store_true", help="rebuild every series from the raw tables")

    def handle(self, *args, benchmark=None, rebuild=False, **options):
        benchmarks = Benchmark.objects.select_related("engine_source").order_by("slug")
        if benchmark is not None:
            benchmarks = benchmarks.filter(slug=benchmark)
            if not benchmarks.exists():
                raise CommandError(f"no benchmark with slug {benchmark!r}")
        report = rollups.RefreshReport()
        for bench in benchmarks:
            rollups.refresh_benchmark(bench, rebuild_all=rebuild, report=report)
        summaries = home_cache.note_changes(b.pk for b in benchmarks)
        for line in report.lines() or ["no benchmarks: nothing to do"]:
            self.stdout.write(line)
        rebuilt = sum(len(names) for names in report.rebuilt.values())
        self.stdout.write(f"{rebuilt} series rebuilt, {sum(report.current.values())} up to date; "
                          f"home page summaries of {summaries} benchmark(s) to be recomputed")
