from django.apps import AppConfig


class RegressionsConfig(AppConfig):
    name = "benchsite.regressions"
    label = "regressions"
    verbose_name = "Regression verdicts, change points and alerts"

    def ready(self):
        from benchsite.bench.lifecycle.signals import run_finished

        from . import receivers, retention, subscriptions_section
        from . import tasks  # noqa: F401  (registers regressions.* with Celery)

        run_finished.connect(receivers.judge_when_finished, dispatch_uid="regressions.judge")
        retention.register_rules()  # bench_gc keeps the runs around change points
        subscriptions_section.register()  # bench_apply applies a file's `subscriptions:` through it
        _schedule_canaries()


def _schedule_canaries():
    """Celery beat looks for due canaries every CANARY_CHECK_S (each has its own interval)."""
    from benchsite.celery import app

    app.conf.beat_schedule = {**(app.conf.beat_schedule or {}), "regression canaries": {
        "task": "regressions.trigger_canaries", "schedule": CANARY_CHECK_S, "options": {"queue": "web"}}}


CANARY_CHECK_S = 600
