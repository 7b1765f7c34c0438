from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "benchsite.hooks"
    label = "hooks"
    verbose_name = "Git push webhooks and API"

    def ready(self):
        from benchsite.bench.signals import run_finished

        from . import receivers, tasks  # noqa: F401  (tasks: registers hooks.* with Celery)

        run_finished.connect(receivers.report_status_when_finished, dispatch_uid="hooks.commit_status")
