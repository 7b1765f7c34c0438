"""What happens to a finished run: verdicts first (steps are added as they are built)."""
from benchsite.bench.models import Run

from .verdicts import verdicts_compute


def run_judge(*, run_id: int) -> None:
    run = Run.objects.select_related("benchmark", "variant").get(id=run_id)
    verdicts_compute(run=run)
