"""Judge finished runs that have no verdicts yet (their judgement failed or was lost).

    python manage.py bench_judge            # every finished run not judged yet
    python manage.py bench_judge --run 5 --run 6
"""
from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.models import Run
from benchsite.regressions.judgement import run_judge_recorded


class Command(BaseCommand):
    help = "Judge finished runs that were not judged (verdicts, change points, confirmation), oldest first."

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, action="append", default=[], help="a run id (repeatable)")

    def handle(self, *args, run, **options):
        pending = Run.objects.filter(state__in=[Run.State.SUCCEEDED, Run.State.FAILED], judged_at__isnull=True)
        if run:
            unknown = sorted(set(run) - set(Run.objects.filter(id__in=run).values_list("id", flat=True)))
            if unknown:
                raise CommandError(f"no run {', '.join(map(str, unknown))}")
            pending = pending.filter(id__in=run)
        ids = list(pending.order_by("created_at", "id").values_list("id", flat=True))
        for run_id in ids:
            judged = run_judge_recorded(run_id=run_id)
            missing = Run.objects.get(id=run_id).judgement_missing
            self.stdout.write(f"run {run_id}: " + ("judged" if judged else f"not judged: {missing}"))
        self.stdout.write(f"{len(ids)} run(s) judged" if ids else "no finished run is waiting for its judgement")
