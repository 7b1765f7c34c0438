from django.apps import AppConfig


class RegressionsConfig(AppConfig):
    name = "benchsite.regressions"
    label = "regressions"
    verbose_name = "Regression verdicts, change points and alerts"

    def ready(self):
        from benchsite.bench.signals import run_finished

        from . import receivers, tasks  # noqa: F401  (tasks: registers regressions.* with Celery)

        run_finished.connect(receivers.judge_when_finished, dispatch_uid="regressions.judge")
