"""What happens to a finished run: verdicts, then change points of its series."""
from benchsite.bench.models import Run

from .changepoints import changepoints_detect
from .verdicts import verdicts_compute


def run_judge(*, run_id: int) -> None:
    run = Run.objects.select_related("benchmark", "variant").get(id=run_id)
    if run.state != Run.State.SUCCEEDED:
        return
    verdicts_compute(run=run)
    changepoints_detect(run=run)
