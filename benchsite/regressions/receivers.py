"""Listener of the run life cycle: judge each finished run, look for change points, confirm and
alert, then bring the outcomes it decided up to date."""


def judge_when_finished(sender, run_id: int, **kwargs) -> None:
    """Never raises: a verdict must not fail the run it judges (judgement.judge_or_defer)."""
    from .judgement import judge_or_defer

    judge_or_defer(run_id=run_id)
