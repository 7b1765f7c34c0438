"""Listener of the run life cycle: judge each finished run, look for change points, confirm and alert."""
import logging

log = logging.getLogger(__name__)


def judge_when_finished(sender, run_id: int, **kwargs) -> None:
    """Never raises: a verdict must not fail the run it judges."""
    try:
        from .pipeline import run_judge

        run_judge(run_id=run_id)
    except Exception:  # a bug or a database hiccup here is logged; the run stays as it is
        log.exception("could not judge run %s", run_id)
